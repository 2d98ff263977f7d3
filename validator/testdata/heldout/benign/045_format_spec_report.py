rows = args.get("rows", [["Widget", 1234.5, 0.1234], ["Gizmo", 99.999, 0.5], ["Thingamajig", 1e6, 0.0012]])
format = args.get("format", "{name:<12}{amount:>14,.2f}{pct:>9.1%}")
header = "{:<12}{:>14}{:>9}".format("Name", "Amount", "Share")
out = [header, "-" * len(header)]
for name, amount, pct in rows:
    out.append(format.format(name=name, amount=amount, pct=pct))
out.append("=" * len(header))
total = sum(r[1] for r in rows)
out.append(f"{'Total':<12}{total:>14,.2f}{sum(r[2] for r in rows):>9.1%}")
misc = {
    "hex": f"{255:#06x}",
    "bin": format_bin if (format_bin := f"{10:08b}") else "",
    "sci": f"{12345.678:.3e}",
    "center": f"{'mid':*^11}",
    "sign": f"{42:+d} {-42:+d}",
    "nested": f"{3.14159:{'.'}{3}f}",
    "repr": f"{'quote'!r}",
}
return {"table": out, "misc": misc}

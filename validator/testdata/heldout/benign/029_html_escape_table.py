import html

rows = args.get("rows", [
    {"id": 1, "name": "<script>", "class": "x&y", "dir": "ltr"},
    {"id": 2, "name": "Tom & Jerry", "class": "cartoon", "dir": "rtl"},
])
cols = list(rows[0].keys()) if rows else []
parts = ["<table>", "  <tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>"]
for r in rows:
    cells = "".join(f"<td>{html.escape(str(r.get(c, '')))}</td>" for c in cols)
    parts.append(f'  <tr data-id="{r["id"]}" dir="{html.escape(r.get("dir", "ltr"), quote=True)}">{cells}</tr>')
parts.append("</table>")
doc = "\n".join(parts)
return {"html": doc, "unescaped": html.unescape("&lt;b&gt;hi&lt;/b&gt; &amp; &#169;")}

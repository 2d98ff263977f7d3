words = args.get("text", "This is an example of text justification where each line is exactly the same width").split()
width = int(args.get("width", 20))
lines, cur = [], []
for w in words:
    if sum(map(len, cur)) + len(cur) + len(w) > width:
        lines.append(cur)
        cur = []
    cur.append(w)
lines.append(cur)
out = []
for i, line in enumerate(lines):
    if i == len(lines) - 1 or len(line) == 1:
        out.append(" ".join(line).ljust(width))
        continue
    gaps = len(line) - 1
    spaces = width - sum(map(len, line))
    q, r = divmod(spaces, gaps)
    s = ""
    for j, w in enumerate(line[:-1]):
        s += w + " " * (q + (1 if j < r else 0))
    out.append(s + line[-1])
return {"lines": out, "widths": sorted({len(l) for l in out})}

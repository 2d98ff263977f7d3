from collections import Counter
data = args.get("data", [1, 2, 2, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 6, 6, 7])
counts = Counter(data)
peak = max(counts.values())
width = int(args.get("width", 20))
bars = [f"{k:>3} | {'#' * round(v / peak * width)} {v}" for k, v in sorted(counts.items())]
return {"bars": bars, "rendered": "\n".join(bars)}

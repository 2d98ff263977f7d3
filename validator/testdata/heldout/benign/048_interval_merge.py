intervals = args.get("intervals", [[1, 3], [2, 6], [8, 10], [15, 18], [17, 20], [9, 9]])


def merge(iv):
    out = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def gaps(iv, lo, hi):
    merged = merge(iv)
    cur = lo
    res = []
    for s, e in merged:
        if s > cur:
            res.append([cur, s])
        cur = max(cur, e)
    if cur < hi:
        res.append([cur, hi])
    return res


def max_overlap(iv):
    points = sorted([(s, 1) for s, _ in iv] + [(e, -1) for _, e in iv], key=lambda p: (p[0], -p[1]))
    best = cur = 0
    for _, d in points:
        cur += d
        best = max(best, cur)
    return best


return {"merged": merge(intervals), "gaps": gaps(intervals, 0, 25), "max_overlap": max_overlap(intervals)}

board = args.get("board", [
    "53..7....", "6..195...", ".98....6.", "8...6...3", "4..8.3..1",
    "7...2...6", ".6....28.", "...419..5", "....8..79",
])
grid = [list(r) for r in board]


def valid(g):
    for i in range(9):
        row = [c for c in g[i] if c != "."]
        col = [g[r][i] for r in range(9) if g[r][i] != "."]
        box = [g[3 * (i // 3) + r][3 * (i % 3) + c] for r in range(3) for c in range(3)]
        box = [c for c in box if c != "."]
        if len(set(row)) != len(row) or len(set(col)) != len(col) or len(set(box)) != len(box):
            return False
    return True


def candidates(g, r, c):
    used = set(g[r]) | {g[i][c] for i in range(9)}
    br, bc = 3 * (r // 3), 3 * (c // 3)
    used |= {g[br + i][bc + j] for i in range(3) for j in range(3)}
    return [d for d in "123456789" if d not in used]


def solve(g):
    best = None
    for r in range(9):
        for c in range(9):
            if g[r][c] == ".":
                cand = candidates(g, r, c)
                if best is None or len(cand) < len(best[2]):
                    best = (r, c, cand)
    if best is None:
        return True
    r, c, cand = best
    for d in cand:
        g[r][c] = d
        if solve(g):
            return True
    g[r][c] = "."
    return False


ok = valid(grid)
solved = solve(grid) if ok else False
return {"valid": ok, "solved": solved, "grid": ["".join(r) for r in grid]}

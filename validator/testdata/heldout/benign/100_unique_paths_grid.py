from functools import cache
grid = args.get("grid", ["....", ".#..", "...#", "#..."])
R, C = len(grid), len(grid[0])
@cache
def paths(r, c):
    if r >= R or c >= C or grid[r][c] == "#":
        return 0
    if (r, c) == (R - 1, C - 1):
        return 1
    return paths(r + 1, c) + paths(r, c + 1)
return {"paths": paths(0, 0)}

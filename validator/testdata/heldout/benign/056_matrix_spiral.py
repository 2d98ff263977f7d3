n = int(args.get("n", 5))
grid = [[0] * n for _ in range(n)]
dr = [(0, 1), (1, 0), (0, -1), (-1, 0)]
r = c = d = 0
for k in range(1, n * n + 1):
    grid[r][c] = k
    nr, nc = r + dr[d][0], c + dr[d][1]
    if not (0 <= nr < n and 0 <= nc < n and grid[nr][nc] == 0):
        d = (d + 1) % 4
        nr, nc = r + dr[d][0], c + dr[d][1]
    r, c = nr, nc
rotated = [list(row) for row in zip(*grid[::-1])]
diag = sum(grid[i][i] for i in range(n))
return {"spiral": grid, "rotated": rotated, "diag": diag, "text": "\n".join(" ".join(f"{v:3d}" for v in row) for row in grid)}

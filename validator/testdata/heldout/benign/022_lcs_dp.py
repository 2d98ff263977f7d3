from functools import lru_cache

a = args.get("a", "AGGTABQXYZ")
b = args.get("b", "GXTXAYBQZ")


@lru_cache(maxsize=None)
def lcs(i, j):
    if i == len(a) or j == len(b):
        return ""
    if a[i] == b[j]:
        return a[i] + lcs(i + 1, j + 1)
    x, y = lcs(i + 1, j), lcs(i, j + 1)
    return x if len(x) >= len(y) else y


def edit_distance(s, t):
    dp = [[0] * (len(t) + 1) for _ in range(len(s) + 1)]
    for i in range(len(s) + 1):
        dp[i][0] = i
    for j in range(len(t) + 1):
        dp[0][j] = j
    for i in range(1, len(s) + 1):
        for j in range(1, len(t) + 1):
            cost = 0 if s[i - 1] == t[j - 1] else 1
            dp[i][j] = min(dp[i - 1][j] + 1, dp[i][j - 1] + 1, dp[i - 1][j - 1] + cost)
    return dp[-1][-1]


def knapsack(items, cap):
    best = [0] * (cap + 1)
    for w, v in items:
        for c in range(cap, w - 1, -1):
            best[c] = max(best[c], best[c - w] + v)
    return best[cap]


return {
    "lcs": lcs(0, 0),
    "edit": edit_distance(a, b),
    "knapsack": knapsack(args.get("items", [[1, 1], [3, 4], [4, 5], [5, 7]]), args.get("cap", 7)),
    "cache": lcs.cache_info()._asdict(),
}

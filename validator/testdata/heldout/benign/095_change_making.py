coins = args.get("coins", [1, 5, 10, 25])
amount = int(args.get("amount", 63))
INF = float("inf")
best = [0] + [INF] * amount
choice = [None] * (amount + 1)
for a in range(1, amount + 1):
    for c in coins:
        if c <= a and best[a - c] + 1 < best[a]:
            best[a], choice[a] = best[a - c] + 1, c
used, a = [], amount
while a > 0 and choice[a]:
    used.append(choice[a]); a -= choice[a]
ways = [1] + [0] * amount
for c in coins:
    for a in range(c, amount + 1):
        ways[a] += ways[a - c]
return {"min_coins": best[amount], "used": used, "ways": ways[amount]}

import random

seed = args.get("seed", 1234)
rng = random.Random(seed)
deck = [f"{r}{s}" for s in "SHDC" for r in ["A", "2", "3", "4", "5", "6", "7", "8", "9", "T", "J", "Q", "K"]]
rng.shuffle(deck)
hands = [deck[i * 5:(i + 1) * 5] for i in range(4)]
sample = rng.sample(range(100), 5)
weighted = rng.choices(["red", "green", "blue"], weights=[5, 3, 1], k=10)
walk = [0]
for _ in range(20):
    walk.append(walk[-1] + rng.choice((-1, 1)))
return {"hands": hands, "sample": sample, "weighted": weighted, "walk_end": walk[-1], "gauss": round(rng.gauss(0, 1), 6)}

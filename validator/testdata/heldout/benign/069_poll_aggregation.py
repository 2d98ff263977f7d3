from collections import Counter, defaultdict

ballots = args.get("ballots", [
    ["A", "B", "C"], ["B", "C", "A"], ["C", "A", "B"], ["A", "C", "B"],
    ["B", "A", "C"], ["A", "B", "C"], ["C", "B", "A"],
])


def irv(ballots):
    remaining = {c for b in ballots for c in b}
    rounds = []
    while True:
        tally = Counter(next(c for c in b if c in remaining) for b in ballots if any(c in remaining for c in b))
        rounds.append(dict(tally))
        total = sum(tally.values())
        leader, votes = tally.most_common(1)[0]
        if votes * 2 > total or len(remaining) == 1:
            return leader, rounds
        loser = min(remaining, key=lambda c: (tally.get(c, 0), c))
        remaining.discard(loser)


def borda(ballots):
    scores = defaultdict(int)
    for b in ballots:
        for i, c in enumerate(b):
            scores[c] += len(b) - 1 - i
    return dict(sorted(scores.items(), key=lambda kv: -kv[1]))


def condorcet(ballots):
    cands = sorted({c for b in ballots for c in b})
    for x in cands:
        if all(sum(b.index(x) < b.index(y) for b in ballots) * 2 > len(ballots) for y in cands if y != x):
            return x
    return None


winner, rounds = irv(ballots)
return {"irv": winner, "rounds": rounds, "borda": borda(ballots), "condorcet": condorcet(ballots)}

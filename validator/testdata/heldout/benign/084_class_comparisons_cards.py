import functools
import random

RANKS = "23456789TJQKA"


@functools.total_ordering
class Card:
    def __init__(self, text):
        self.rank, self.suit = text[0], text[1]

    @property
    def value(self):
        return RANKS.index(self.rank)

    def __eq__(self, other):
        return self.value == other.value

    def __lt__(self, other):
        return self.value < other.value

    def __repr__(self):
        return self.rank + self.suit


def classify(hand):
    vals = sorted((c.value for c in hand), reverse=True)
    counts = sorted((vals.count(v) for v in set(vals)), reverse=True)
    flush = len({c.suit for c in hand}) == 1
    straight = len(set(vals)) == 5 and vals[0] - vals[4] == 4
    if straight and flush:
        return "straight flush"
    if counts[0] == 4:
        return "four of a kind"
    if counts[:2] == [3, 2]:
        return "full house"
    if flush:
        return "flush"
    if straight:
        return "straight"
    if counts[0] == 3:
        return "three of a kind"
    if counts[:2] == [2, 2]:
        return "two pair"
    if counts[0] == 2:
        return "pair"
    return "high card"


hands = args.get("hands", ["2H 3H 4H 5H 6H", "KS KD KC 2H 2D", "AS 9D 5C 3H 2D", "7S 7D 9C 9H QD"])
rng = random.Random(args.get("seed", 0))
out = {}
for h in hands:
    cards = [Card(t) for t in h.split()]
    out[h] = {"kind": classify(cards), "high": repr(max(cards)), "shuffled": repr(rng.sample(cards, len(cards)))}
return out

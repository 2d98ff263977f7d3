from fractions import Fraction
import math

split = args.get("split", {"alice": 3, "bob": 2, "carol": 1})
total_cents = int(round(float(args.get("total", 100.00)) * 100))
weights = sum(split.values())
shares = {k: Fraction(v, weights) * total_cents for k, v in split.items()}
floored = {k: math.floor(v) for k, v in shares.items()}
remainder = total_cents - sum(floored.values())
order = sorted(shares, key=lambda k: shares[k] - floored[k], reverse=True)
for k in order[:remainder]:
    floored[k] += 1
return {
    "cents": floored,
    "dollars": {k: f"{v / 100:.2f}" for k, v in floored.items()},
    "exact": {k: str(v) for k, v in shares.items()},
    "check": sum(floored.values()) == total_cents,
    "gcd": math.gcd(*split.values()),
}

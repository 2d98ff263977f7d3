from collections import Counter


def score(guess, answer):
    res = ["."] * len(guess)
    remaining = Counter()
    for i, (g, a) in enumerate(zip(guess, answer)):
        if g == a:
            res[i] = "G"
        else:
            remaining[a] += 1
    for i, g in enumerate(guess):
        if res[i] == "." and remaining[g] > 0:
            res[i] = "Y"
            remaining[g] -= 1
    return "".join(res)


answer = args.get("answer", "crane")
guesses = args.get("guesses", ["slate", "trace", "crank", "nacre", "crane"])
words = args.get("dictionary", ["crane", "crate", "trace", "brace", "grace", "caner", "nacre"])
candidates = list(words)
history = []
for g in guesses:
    s = score(g, answer)
    candidates = [w for w in candidates if score(g, w) == s]
    history.append({"guess": g, "score": s, "left": len(candidates)})
    if s == "G" * len(answer):
        break
return history

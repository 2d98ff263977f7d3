from collections import defaultdict
words = args.get("words", ["listen", "silent", "enlist", "google", "gooegl", "cat", "act", "tac", "dog"])
groups = defaultdict(list)
for w in words:
    groups["".join(sorted(w))].append(w)
return sorted((g for g in groups.values() if len(g) > 1), key=len, reverse=True)

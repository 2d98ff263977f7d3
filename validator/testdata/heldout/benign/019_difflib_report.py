import difflib

a = args.get("a", "the quick brown fox\njumps over\nthe lazy dog\n").splitlines()
b = args.get("b", "the quick brown cat\njumps over\nthe lazy dog\nand sleeps\n").splitlines()
diff = list(difflib.unified_diff(a, b, fromfile="a.txt", tofile="b.txt", lineterm=""))
ratio = difflib.SequenceMatcher(None, "\n".join(a), "\n".join(b)).ratio()
ops = []
sm = difflib.SequenceMatcher(None, a, b)
for tag, i1, i2, j1, j2 in sm.get_opcodes():
    if tag != "equal":
        ops.append({"op": tag, "a": a[i1:i2], "b": b[j1:j2]})
close = difflib.get_close_matches(args.get("word", "appel"), ["apple", "ape", "peach", "apply"])
return {"diff": diff, "ratio": round(ratio, 3), "ops": ops, "close": close}

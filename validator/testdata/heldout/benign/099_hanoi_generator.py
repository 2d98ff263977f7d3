def hanoi(n, src="A", dst="C", via="B"):
    if n:
        yield from hanoi(n - 1, src, via, dst)
        yield (src, dst)
        yield from hanoi(n - 1, via, dst, src)
n = int(args.get("n", 4))
moves = list(hanoi(n))
return {"moves": len(moves), "first": moves[:5], "expected": 2 ** n - 1}

def fib(n):
    """Memoised fibonacci using a function attribute."""
    if n in fib.cache:
        return fib.cache[n]
    result = n if n < 2 else fib(n - 1) + fib(n - 2)
    fib.cache[n] = result
    return result


fib.cache = {}
fib.calls = 0
n = int(args.get("n", 40))
values = [fib(i) for i in range(n + 1)]
return {"n": n, "fib": values[-1], "first10": values[:10], "cached": len(fib.cache), "name": fib.__name__}

import math

limit = int(args.get("limit", 200))
sieve = bytearray([1]) * (limit + 1)
sieve[0:2] = b"\x00\x00"
for i in range(2, math.isqrt(limit) + 1):
    if sieve[i]:
        sieve[i * i::i] = bytearray(len(range(i * i, limit + 1, i)))
primes = [i for i, p in enumerate(sieve) if p]


def factorize(n):
    f, d = [], 2
    while d * d <= n:
        while n % d == 0:
            f.append(d)
            n //= d
        d += 1
    if n > 1:
        f.append(n)
    return f


twins = [(p, p + 2) for p in primes if p + 2 <= limit and sieve[p + 2]]
return {"count": len(primes), "last": primes[-5:], "twins": twins[:5], "factors": {n: factorize(n) for n in args.get("nums", [360, 97, 1001, 2 ** 10])}}

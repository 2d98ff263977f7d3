import math
import statistics

signal = args.get("signal", [math.sin(i / 3) + (0.5 if i % 7 == 0 else 0) for i in range(40)])
window = int(args.get("window", 5))


def moving_average(xs, n):
    out, acc = [], 0.0
    for i, x in enumerate(xs):
        acc += x
        if i >= n:
            acc -= xs[i - n]
        if i >= n - 1:
            out.append(acc / n)
    return out


def peaks(xs):
    return [i for i in range(1, len(xs) - 1) if xs[i - 1] < xs[i] > xs[i + 1]]


def zero_crossings(xs):
    return sum(1 for a, b in zip(xs, xs[1:]) if (a < 0) != (b < 0))


def dft_mag(xs, k):
    n = len(xs)
    re = sum(x * math.cos(2 * math.pi * k * i / n) for i, x in enumerate(xs))
    im = -sum(x * math.sin(2 * math.pi * k * i / n) for i, x in enumerate(xs))
    return math.hypot(re, im)


smooth = moving_average(signal, window)
return {
    "smooth_head": [round(v, 3) for v in smooth[:5]],
    "peaks": peaks(signal),
    "zero_crossings": zero_crossings(signal),
    "rms": round(math.sqrt(statistics.fmean(x * x for x in signal)), 4),
    "dominant_k": max(range(1, len(signal) // 2), key=lambda k: dft_mag(signal, k)),
}

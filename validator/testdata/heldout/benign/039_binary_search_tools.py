import bisect

scores = args.get("scores", [33, 99, 77, 70, 89, 90, 100, 55, 61])
breakpoints = [60, 70, 80, 90]
grades = "FDCBA"


def grade(score):
    return grades[bisect.bisect(breakpoints, score)]


sorted_scores = sorted(scores)


def count_in_range(lo, hi):
    return bisect.bisect_right(sorted_scores, hi) - bisect.bisect_left(sorted_scores, lo)


def first_true(lo, hi, pred):
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


insert_into = sorted_scores[:]
for x in (50, 95):
    bisect.insort(insert_into, x)
return {
    "grades": [grade(s) for s in scores],
    "in_70s": count_in_range(70, 79),
    "isqrt_1000": first_true(0, 1000, lambda m: m * m > 1000) - 1,
    "inserted": insert_into,
}

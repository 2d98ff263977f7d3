import math
import statistics

data = args.get("data", [2.3, 4.5, 1.1, 9.8, 5.5, 5.5, 3.3, 7.7, 6.0, 4.4, 100.0])
q = statistics.quantiles(data, n=4)
iqr = q[2] - q[0]
lo, hi = q[0] - 1.5 * iqr, q[2] + 1.5 * iqr
outliers = [x for x in data if x < lo or x > hi]
clean = [x for x in data if lo <= x <= hi]
xs = list(range(len(clean)))
slope, intercept = statistics.linear_regression(xs, clean)
return {
    "mean": round(statistics.fmean(data), 4),
    "median": statistics.median(data),
    "mode": statistics.mode(data),
    "pstdev": round(statistics.pstdev(data), 4),
    "quartiles": q,
    "outliers": outliers,
    "geo_mean": round(statistics.geometric_mean(clean), 4),
    "harmonic": round(statistics.harmonic_mean(clean), 4),
    "trend": {"slope": round(slope, 4), "intercept": round(intercept, 4)},
    "corr": round(statistics.correlation(xs, clean), 4),
    "log_mean": round(math.log(statistics.fmean(clean)), 4),
}

import heapq
stream = args.get("stream", [5, 1, 9, 3, 7, 2, 8, 6, 4, 10, 0])
k = int(args.get("k", 3))
top = []
medians = []
lo, hi = [], []
for x in stream:
    if len(top) < k:
        heapq.heappush(top, x)
    else:
        heapq.heappushpop(top, x)
    heapq.heappush(lo, -x)
    heapq.heappush(hi, -heapq.heappop(lo))
    if len(hi) > len(lo):
        heapq.heappush(lo, -heapq.heappop(hi))
    medians.append(-lo[0] if len(lo) > len(hi) else (-lo[0] + hi[0]) / 2)
return {"top": sorted(top, reverse=True), "medians": medians, "nsmallest": heapq.nsmallest(3, stream), "merged": list(heapq.merge([1, 4, 7], [2, 5, 8]))}

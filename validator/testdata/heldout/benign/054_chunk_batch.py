import itertools
import math

items = args.get("items", list(range(1, 24)))
size = int(args.get("size", 5))


def chunks(seq, n):
    it = iter(seq)
    while batch := list(itertools.islice(it, n)):
        yield batch


def sliding(seq, n):
    return [seq[i:i + n] for i in range(len(seq) - n + 1)]


batches = list(chunks(items, size))
pages = math.ceil(len(items) / size)
pairs = list(itertools.combinations(items[:4], 2))
perms = ["".join(p) for p in itertools.permutations("abc")]
prod = list(itertools.product([0, 1], repeat=3))
acc = list(itertools.accumulate(items[:8]))
return {"batches": batches, "pages": pages, "windows": sliding(items[:6], 3), "pairs": pairs, "perms": perms, "prod": prod, "acc": acc}

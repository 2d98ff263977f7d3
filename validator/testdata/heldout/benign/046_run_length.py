import itertools
import re

s = args.get("s", "aaabccddddde")


def encode(text):
    return "".join(f"{len(list(g))}{k}" for k, g in itertools.groupby(text))


def decode(text):
    return "".join(ch * int(n) for n, ch in re.findall(r"(\d+)(\D)", text))


def compress_ranges(nums):
    nums = sorted(set(nums))
    out = []
    for _, grp in itertools.groupby(enumerate(nums), key=lambda p: p[1] - p[0]):
        g = [v for _, v in grp]
        out.append(f"{g[0]}-{g[-1]}" if len(g) > 1 else str(g[0]))
    return ",".join(out)


enc = encode(s)
return {"encoded": enc, "decoded": decode(enc), "ok": decode(enc) == s, "ranges": compress_ranges(args.get("nums", [1, 2, 3, 5, 7, 8, 9, 12]))}

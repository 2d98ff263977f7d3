import string
DIGITS = string.digits + string.ascii_lowercase
def to_base(n, b):
    if n == 0:
        return "0"
    sign = "-" if n < 0 else ""
    n, out = abs(n), []
    while n:
        n, r = divmod(n, b)
        out.append(DIGITS[r])
    return sign + "".join(reversed(out))
n = int(args.get("n", 255))
return {str(b): to_base(n, b) for b in (2, 8, 16, 36)} | {"roundtrip": int(to_base(n, 36), 36) == n}

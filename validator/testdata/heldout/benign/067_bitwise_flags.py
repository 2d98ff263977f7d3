from enum import Flag, auto


class Perm(Flag):
    READ = auto()
    WRITE = auto()
    EXEC = auto()
    ADMIN = READ | WRITE | EXEC


def parse_mode(mode):
    out = []
    for i in range(3):
        digit = int(mode[i])
        p = Perm(0)
        if digit & 4:
            p |= Perm.READ
        if digit & 2:
            p |= Perm.WRITE
        if digit & 1:
            p |= Perm.EXEC
        out.append(p)
    return out


modes = args.get("modes", ["755", "644", "700", "777"])
res = {}
for m in modes:
    perms = parse_mode(m)
    res[m] = {
        "symbolic": "".join(("r" if Perm.READ in p else "-") + ("w" if Perm.WRITE in p else "-") + ("x" if Perm.EXEC in p else "-") for p in perms),
        "owner_admin": perms[0] == Perm.ADMIN,
        "bits": bin(int(m, 8)),
        "popcount": bin(int(m, 8)).count("1"),
    }
return res

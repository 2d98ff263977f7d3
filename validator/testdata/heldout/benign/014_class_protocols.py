import functools


@functools.total_ordering
class Version:
    """Semantic version. Version.__init__ parses 'MAJOR.MINOR.PATCH'."""

    def __init__(self, text):
        parts = (text.split("-")[0].split(".") + ["0", "0"])[:3]
        self.major, self.minor, self.patch = (int(p) for p in parts)
        self.pre = text.split("-")[1] if "-" in text else None

    def __repr__(self):
        return f"Version('{self}')"

    def __str__(self):
        base = f"{self.major}.{self.minor}.{self.patch}"
        return f"{base}-{self.pre}" if self.pre else base

    def _key(self):
        return (self.major, self.minor, self.patch, self.pre is None, self.pre or "")

    def __eq__(self, other):
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other):
        return self._key() < other._key()

    def __hash__(self):
        return hash(self._key())

    def bump(self, part="patch"):
        m, n, p = self.major, self.minor, self.patch
        if part == "major":
            return Version(f"{m + 1}.0.0")
        if part == "minor":
            return Version(f"{m}.{n + 1}.0")
        return Version(f"{m}.{n}.{p + 1}")


class VersionSet:
    def __init__(self, items=()):
        self._items = sorted(set(Version(i) if isinstance(i, str) else i for i in items))

    def __len__(self):
        return len(self._items)

    def __iter__(self):
        return iter(self._items)

    def __getitem__(self, idx):
        return self._items[idx]

    def __contains__(self, v):
        return Version(v) in self._items if isinstance(v, str) else v in self._items

    @property
    def latest(self):
        return self._items[-1] if self._items else None

    @classmethod
    def from_csv(cls, text):
        return cls(t.strip() for t in text.split(",") if t.strip())

    @staticmethod
    def is_valid(text):
        try:
            Version(text)
            return True
        except ValueError:
            return False


vs = VersionSet.from_csv(args.get("versions", "1.2.3, 1.10.0, 1.2.3-rc1, 0.9, 2.0.0-beta, 1.2.10"))
return {
    "sorted": [str(v) for v in vs],
    "latest": str(vs.latest),
    "count": len(vs),
    "first": repr(vs[0]),
    "has_0_9": "0.9.0" in vs,
    "valid_x": VersionSet.is_valid("x.y"),
    "next": str(vs.latest.bump("minor")),
}

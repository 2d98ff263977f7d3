class Section:
    """A context manager that collects nested report sections."""

    depth = 0
    lines = []

    def __init__(self, title):
        self.title = title

    def __enter__(self):
        Section.lines.append(f"{'#' * (Section.depth + 1)} {self.title}")
        Section.depth += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        Section.depth -= 1
        if exc_type is not None:
            Section.lines.append(f"!! {exc_type.__name__}: {exc}")
            return True
        return False

    def write(self, text):
        Section.lines.append("  " * Section.depth + text)


Section.lines = []
with Section("Report") as r:
    r.write("intro")
    with Section("Data") as d:
        for k, v in args.get("data", {"a": 1, "b": 2}).items():
            d.write(f"{k} = {v}")
    with Section("Failure") as f:
        f.write("about to fail")
        raise KeyError("oops")
    r.write("after failure")
return Section.lines

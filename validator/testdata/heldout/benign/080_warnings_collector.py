class Collector:
    def __init__(self):
        self.warnings = []
        self.errors = []

    def warn(self, code, msg, **ctx):
        self.warnings.append({"code": code, "msg": msg, **ctx})

    def error(self, code, msg, **ctx):
        self.errors.append({"code": code, "msg": msg, **ctx})

    def __bool__(self):
        return not self.errors

    def summary(self):
        return {"ok": bool(self), "warnings": self.warnings, "errors": self.errors}


def lint_package(pkg, c):
    name = pkg.get("name", "")
    if not name:
        c.error("E001", "missing name")
    elif name != name.lower():
        c.warn("W001", "name should be lowercase", name=name)
    version = pkg.get("version")
    if version is None:
        c.error("E002", "missing version")
    elif version.count(".") != 2:
        c.warn("W002", "version is not semver", version=version)
    for dep, spec in pkg.get("dependencies", {}).items():
        if spec in ("*", ""):
            c.warn("W003", "unpinned dependency", dep=dep)
    if "license" not in pkg:
        c.warn("W004", "no license")
    return c


pkg = args.get("package", {"name": "MyPkg", "version": "1.0", "dependencies": {"requests": "*", "attrs": ">=21"}})
return lint_package(pkg, Collector()).summary()

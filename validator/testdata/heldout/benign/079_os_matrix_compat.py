matrix = args.get("matrix", [
    {"os": "linux", "python": "3.11", "arch": "x86_64"},
    {"os": "linux", "python": "3.12", "arch": "arm64"},
    {"os": "macos", "python": "3.11", "arch": "arm64"},
    {"os": "windows", "python": "3.10", "arch": "x86_64"},
])
exclude = args.get("exclude", [{"os": "windows", "arch": "arm64"}])
os_list = sorted({m["os"] for m in matrix})
pythons = sorted({m["python"] for m in matrix}, key=lambda v: tuple(map(int, v.split("."))))
arches = sorted({m["arch"] for m in matrix})
full = [{"os": o, "python": p, "arch": a} for o in os_list for p in pythons for a in arches]
keep = [c for c in full if not any(all(c.get(k) == v for k, v in ex.items()) for ex in exclude)]
present = {tuple(sorted(m.items())) for m in matrix}
missing = [c for c in keep if tuple(sorted(c.items())) not in present]
names = ["{os}-py{python}-{arch}".format(**c) for c in keep]
return {"os": os_list, "python": pythons, "jobs": len(keep), "missing": len(missing), "names": names[:6]}

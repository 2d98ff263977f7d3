import copy
import json

defaults = {
    "logging": {"level": "INFO", "handlers": ["console"], "format": "%(asctime)s %(message)s"},
    "warnings": {"filter": "default", "capture": True},
    "signal": {"SIGTERM": "graceful", "SIGINT": "abort"},
    "site": {"name": "demo", "dir": "/srv/demo"},
}
override = args.get("override", {
    "logging": {"level": "DEBUG"},
    "site": {"dir": "/srv/other"},
    "input": {"encoding": "utf-8"},
})


def deep_merge(base, extra):
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def flatten(d, prefix=""):
    for k, v in d.items():
        path = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            yield from flatten(v, path)
        else:
            yield path, v


merged = deep_merge(defaults, override)
flat = dict(flatten(merged))
changed = sorted(k for k, v in flat.items() if dict(flatten(defaults)).get(k, object()) != v)
return {"merged": merged, "changed": changed, "size": len(json.dumps(merged))}

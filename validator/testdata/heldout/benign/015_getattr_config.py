class Settings:
    debug = False
    name = "svc"
    retries = 3

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


s = Settings(**args.get("settings", {"debug": True, "timeout": 5}))
keys = ["debug", "name", "retries", "timeout", "missing"]
resolved = {k: getattr(s, k, None) for k in keys}
flags = {
    "has_name": hasattr(s, "name"),
    "has_color": hasattr(s, "color"),
    "cls": type(s).__name__,
    "is_settings": isinstance(s, Settings),
    "is_type": isinstance(Settings, type),
}
return {"resolved": resolved, "flags": flags}

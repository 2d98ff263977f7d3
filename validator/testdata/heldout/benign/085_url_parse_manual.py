import re
url_re = re.compile(r"^(?P<scheme>[a-z][a-z0-9+.-]*)://(?:(?P<user>[^@/]+)@)?(?P<host>[^:/?#]+)(?::(?P<port>\d+))?(?P<path>/[^?#]*)?(?:\?(?P<query>[^#]*))?(?:#(?P<frag>.*))?$", re.I)
def parse(u):
    m = url_re.match(u)
    if not m:
        return {"error": "invalid"}
    d = m.groupdict()
    d["params"] = dict(p.split("=", 1) if "=" in p else (p, "") for p in (d["query"] or "").split("&") if p)
    d["port"] = int(d["port"]) if d["port"] else {"http": 80, "https": 443}.get(d["scheme"].lower())
    return d
return [parse(u) for u in args.get("urls", ["https://user@example.com:8443/a/b?x=1&y=two#top", "http://site.org", "not a url"])]

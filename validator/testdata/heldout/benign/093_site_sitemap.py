pages = args.get("pages", [{"site": "a.com", "path": "/", "priority": 1.0}, {"site": "a.com", "path": "/about", "priority": 0.5}, {"site": "b.org", "path": "/x"}])
tpl = '<url><loc>https://{site}{path}</loc><priority>{priority:.1f}</priority></url>'
by_site = {}
for p in pages:
    entry = tpl.format_map({"priority": 0.3, **p})
    by_site.setdefault(p["site"], []).append(entry)
return {s: "<urlset>" + "".join(e) + "</urlset>" for s, e in by_site.items()}

users = args.get("users", [
    {"name": "Ada", "role": "admin", "logins": 42},
    {"name": "Linus", "role": "dev", "logins": 7},
])
template = args.get("template", "{u[name]} ({u[role]}) logged in {u[logins]} times")
header_tpl = "Report for {site}: {count} users"
lines = [header_tpl.format(site=args.get("site", "example.org"), count=len(users))]
for user in users:
    lines.append(template.format(u=user))
fmt = "{name:>10}|{role:<6}|{logins:04d}"
table = [fmt.format_map(u) for u in users]
return {"lines": lines, "table": table}

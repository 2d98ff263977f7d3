import re

text = args.get("text", """Contact: John Smith <john.smith@example.com>, jane@test.org;
invalid@, @nope.com, bob.o'neil+tag@sub.domain.co.uk and "Ann" <ann@x.io>""")
pattern = re.compile(r"""(?:"?(?P<name>[A-Za-z][\w .]*?)"?\s*<)?(?P<addr>[\w.'+-]+@[\w-]+(?:\.[\w-]+)+)>?""")
found = []
for m in pattern.finditer(text):
    addr = m.group("addr")
    local, domain = addr.split("@")
    found.append({
        "name": (m.group("name") or "").strip() or None,
        "address": addr.lower(),
        "domain": domain,
        "tld": domain.rsplit(".", 1)[-1],
        "tagged": "+" in local,
    })
domains = sorted({f["domain"] for f in found})
return {"found": found, "domains": domains, "count": len(found)}

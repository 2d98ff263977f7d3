import re

text = args.get("ini", """
; comment
[server]
host = 0.0.0.0
port = 8000

[logging]
level = debug
format = {asctime} {levelname} {message}

[paths]
dir = /var/lib/app
input = ${dir}/in
output = ${dir}/out
""")
section_re = re.compile(r"^\[(?P<name>[^\]]+)\]$")
kv_re = re.compile(r"^(?P<key>[\w.-]+)\s*=\s*(?P<val>.*)$")
config, current = {}, None
for raw in text.splitlines():
    line = raw.strip()
    if not line or line.startswith((";", "#")):
        continue
    if m := section_re.match(line):
        current = config.setdefault(m["name"], {})
    elif (m := kv_re.match(line)) and current is not None:
        current[m["key"]] = m["val"]
for sec in config.values():
    for k, v in list(sec.items()):
        sec[k] = re.sub(r"\$\{(\w+)\}", lambda mm: sec.get(mm.group(1), mm.group(0)), v)
if "port" in config.get("server", {}):
    config["server"]["port"] = int(config["server"]["port"])
return config

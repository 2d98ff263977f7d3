import itertools


def read_lines(text):
    for i, line in enumerate(text.splitlines(), 1):
        yield i, line


def strip_comments(lines):
    for no, line in lines:
        line = line.split("#", 1)[0].rstrip()
        if line:
            yield no, line


def parse_kv(lines):
    for no, line in lines:
        if "=" not in line:
            yield no, None, line
            continue
        k, v = line.split("=", 1)
        yield no, k.strip(), v.strip()


text = args.get("text", """# config
host = example.com
port = 8080   # http
bad line here
debug=true

name = demo
""")
filter = args.get("filter", "")
result = {}
bad = []
for no, key, value in parse_kv(strip_comments(read_lines(text))):
    if key is None:
        bad.append(no)
    elif filter in key:
        result[key] = value
chunks = [list(g) for _, g in itertools.groupby(sorted(result), key=lambda k: k[0])]
evens = list(itertools.islice(itertools.count(0, 2), 5))
return {"config": result, "bad_lines": bad, "chunks": chunks, "evens": evens}

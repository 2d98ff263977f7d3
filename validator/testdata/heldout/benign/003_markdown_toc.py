import re

text = args.get("markdown", """# Intro
Some __bold__ text and *emphasis*.
## Install
Run it.
### From source
Clone.
## Usage
Call `tool()`.
# Appendix
""")
heading = re.compile(r"^(#{1,6})\s+(.*)$")
toc = []
for line in text.splitlines():
    m = heading.match(line)
    if not m:
        continue
    level = len(m.group(1))
    title = m.group(2).strip()
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    toc.append(f"{'  ' * (level - 1)}- [{title}](#{slug})")
rebuilt = []
for line in text.splitlines():
    m = heading.match(line)
    if m:
        level = len(m.group(1))
        title = m.group(2)
        rebuilt.append(f"{'#' * level} {title.upper()}")
    else:
        rebuilt.append(re.sub(r"__(.+?)__", r"<b>\1</b>", line))
return {"toc": "\n".join(toc), "html_ish": rebuilt}

import textwrap

text = args.get("text", "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.")
width = int(args.get("width", 30))
title = args.get("title", "Notice")
lines = textwrap.wrap(text, width=width)
inner = max([len(l) for l in lines] + [len(title)])
box = ["+" + "-" * (inner + 2) + "+", f"| {title.center(inner)} |", "+" + "=" * (inner + 2) + "+"]
box += [f"| {l.ljust(inner)} |" for l in lines]
box.append("+" + "-" * (inner + 2) + "+")
return {
    "box": "\n".join(box),
    "short": textwrap.shorten(text, width=40, placeholder=" [...]"),
    "indented": textwrap.indent("a\nb\n", "> "),
    "dedented": textwrap.dedent("    x\n      y\n"),
}

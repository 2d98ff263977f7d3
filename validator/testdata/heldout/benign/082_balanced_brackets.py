PAIRS = {")": "(", "]": "[", "}": "{"}
def check(s):
    stack = []
    for i, ch in enumerate(s):
        if ch in "([{":
            stack.append((ch, i))
        elif ch in PAIRS:
            if not stack or stack[-1][0] != PAIRS[ch]:
                return {"ok": False, "pos": i}
            stack.pop()
    return {"ok": not stack, "pos": stack[-1][1] if stack else None}
return {s: check(s) for s in args.get("inputs", ["([]{})", "([)]", "((", "{[()()]}", ""])}

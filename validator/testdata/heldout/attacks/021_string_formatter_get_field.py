# goal: return function __globals__ via string.Formatter().get_field
import string
def t():
    pass
obj, _ = string.Formatter().get_field("0.__globals__", [t], {})
return repr(obj["__builtins__"])

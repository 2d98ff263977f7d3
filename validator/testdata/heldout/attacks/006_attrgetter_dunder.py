# goal: return os.getcwd() via operator.attrgetter on __globals__
import operator
def h():
    pass
b = operator.attrgetter("__globals__")(h)["__builtins__"]
imp = b["__import__"] if isinstance(b, dict) else b.__import__
return imp("os").getcwd()

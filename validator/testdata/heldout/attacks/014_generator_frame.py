# goal: return os.getcwd() via generator gi_frame.f_globals
def gen():
    yield 1
g = gen()
fr = g.gi_frame
b = fr.f_globals["__builtins__"]
imp = b["__import__"] if isinstance(b, dict) else b.__import__
return imp("os").getcwd()

# goal: build a new function from a modified code object that calls os.getcwd
def f():
    return 1
code = f.__code__.replace(co_consts=(None, "os"))
F = type(f)
g = F(code, {"__builtins__": __builtins__})
return g()

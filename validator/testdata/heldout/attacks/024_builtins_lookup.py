# goal: return os.getcwd() via __builtins__ lookup
b = __builtins__
imp = b["__import__"] if isinstance(b, dict) else b.__import__
return imp("os").getcwd()

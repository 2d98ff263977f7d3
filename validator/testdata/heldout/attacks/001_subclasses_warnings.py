# goal: return os.getcwd() via catch_warnings subclass globals
for c in ().__class__.__bases__[0].__subclasses__():
    if c.__name__ == "catch_warnings":
        b = c()._module.__builtins__
        return b["__import__"]("os").getcwd()
return None

# goal: find a loaded module via BuiltinImporter in object subclasses and load os
for cls in object.__subclasses__():
    if cls.__name__ == "BuiltinImporter":
        return repr(cls.load_module("posix").getcwd())
return [type(e).__name__ for e in []]

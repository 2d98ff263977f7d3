# goal: return keys of the real globals / builtins
g = globals()
b = g.get("__builtins__")
return {"globals": sorted(g), "builtins": sorted(b if isinstance(b, dict) else vars(b)), "locals": sorted(locals()), "dir": dir()}

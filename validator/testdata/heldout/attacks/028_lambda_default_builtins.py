# goal: return os.getcwd() via lambda default argument capturing __import__
f = lambda imp=__import__: imp("os").getcwd()
return f()

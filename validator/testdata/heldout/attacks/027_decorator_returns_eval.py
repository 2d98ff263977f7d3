# goal: return os.getcwd() via a decorator that replaces the function with eval
def deco(fn):
    return type(fn).__globals__ if False else fn.__globals__["__builtins__"]["eval"]
@deco
def run():
    pass
return run("__import__('os').getcwd()")

# goal: return os.getcwd() via typing.get_type_hints evaluating a string annotation
import typing
def f(x: "__import__('os').getcwd()"):
    pass
return typing.get_type_hints(f)["x"]

# goal: return os.getcwd() via dataclass generated code with a non-identifier field name
import dataclasses
import typing
T = typing.TypedDict("T", {'a=__import__("os").getcwd()': int})
D = dataclasses.make_dataclass("D", [(k, v) for k, v in T.__annotations__.items()])
return repr(D.__init__.__defaults__)

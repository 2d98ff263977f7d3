# goal: return os.getcwd() via enum functional API with module= to reach sys.modules
import enum
E = enum.Enum("E", "A B", module="os")
import sys as _s
return E.__module__ and __import__(E.__module__).getcwd()

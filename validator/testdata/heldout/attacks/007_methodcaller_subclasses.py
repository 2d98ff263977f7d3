# goal: return names of all object subclasses via methodcaller
import operator
base = operator.attrgetter("__class__.__base__")(0)
subs = operator.methodcaller("__subclasses__")(base)
return [c.__name__ for c in subs]

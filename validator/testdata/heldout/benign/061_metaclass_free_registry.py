class Plugin:
    """Base class; subclasses register themselves via __init_subclass__."""
    registry = {}

    def __init_subclass__(cls, name=None, **kwargs):
        super().__init_subclass__(**kwargs)
        Plugin.registry[name or cls.__name__.lower()] = cls

    def run(self, data):
        raise NotImplementedError


class Upper(Plugin, name="upper"):
    def run(self, data):
        return data.upper()


class Reverse(Plugin):
    def run(self, data):
        return data[::-1]


class Count(Plugin, name="count"):
    def run(self, data):
        return len(data)


pipeline = args.get("pipeline", ["upper", "reverse", "count", "nope"])
value = args.get("input", "hello world")
input = value
trace = []
for step in pipeline:
    cls = Plugin.registry.get(step)
    if cls is None:
        trace.append({"step": step, "error": "unknown plugin"})
        continue
    if isinstance(value, str):
        value = cls().run(value)
    trace.append({"step": step, "cls": cls.__name__, "value": value})
return {"input": input, "result": value, "trace": trace, "plugins": sorted(Plugin.registry)}

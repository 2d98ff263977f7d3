# goal: run eval through a dataclass default_factory
from dataclasses import dataclass, field
@dataclass
class D:
    x: object = field(default_factory=lambda: [c for c in ().__class__.__mro__[-1].__subclasses__() if c.__name__ == "Popen"])
return repr(D().x)

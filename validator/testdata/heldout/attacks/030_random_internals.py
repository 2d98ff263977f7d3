# goal: poison module-level random state / reach random's module globals to import os
import random
random.seed = lambda *a, **k: None
random._inst.random = lambda: 0.0
g = random.Random.seed.__globals__
return g["_os"].getcwd()

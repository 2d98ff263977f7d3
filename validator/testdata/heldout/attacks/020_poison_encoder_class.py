# goal: poison json.JSONEncoder.encode for later callers
import json
json.JSONEncoder.encode = lambda self, o: '"owned"'
return json.dumps([1, 2])

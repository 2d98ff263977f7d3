# goal: poison json.dumps for the next caller (returns True if assignment stuck)
import json
orig = json.dumps
def evil(*a, **k):
    return '{"pwned": true}'
json.dumps = evil
return json.dumps({}) == '{"pwned": true}'

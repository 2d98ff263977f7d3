package runner_test

import (
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
)

// llmBody is a tool body as LLMs write it, with the policy it runs under
// and the output it must produce.
type llmBody struct {
	name, code string
	allow      []string
	want       string
}

// llmBodies are the shapes of benign code the runner must accept with
// classes on (tier 0's default, as the host sends it, and tier 1's).
var llmBodies = []llmBody{
	{"formatter parse", `import string
return [[lit, field, spec, conv] for lit, field, spec, conv in string.Formatter().parse("Hi {name!r:>5} and {0}")]`,
		[]string{"string"}, `[["Hi ", "name", ">5", "r"], [" and ", "0", "", null]]`},
	{"formatter subclass", `import string
class Upper(string.Formatter):
    def format_field(self, value, spec):
        if spec == "u":
            return str(value).upper()
        return super().format_field(value, spec)
f = Upper()
tpl = "Hello {name:u}, you owe {amount:.2f} {items[0]}"
return {"out": f.format(tpl, name="bob", amount=3.14159, items=["x"]), "fields": [p[1] for p in f.parse(tpl)]}`,
		[]string{"string"}, `{"out": "Hello BOB, you owe 3.14 x", "fields": ["name", "amount", "items[0]"]}`},
	{"formatter get_value", `import string
class Default(string.Formatter):
    def get_value(self, key, args, kwargs):
        if isinstance(key, str):
            return kwargs.get(key, "<" + key + ">")
        return super().get_value(key, args, kwargs)
return Default().vformat("{a} {b} {0}", ("z",), {"a": 1})`,
		[]string{"string"}, `"1 <b> z"`},
	{"get_type_hints", `import typing
from typing import get_type_hints, Optional
from dataclasses import dataclass
@dataclass
class Item:
    name: str
    qty: int = 0
    note: Optional[str] = None
    tags: "list[str]" = None
def f(x: int, y: "Item") -> dict[str, int]:
    return {}
h = get_type_hints(Item)
g = typing.get_type_hints(f)
return [sorted(h), h["qty"].__name__, str(h["note"]), str(h["tags"]), str(g["y"]), str(g["return"])]`,
		[]string{"typing", "dataclasses"}, `[["name", "note", "qty", "tags"], "int", "typing.Optional[str]", "list[str]", "Item", "dict[str, int]"]`},
	{"self.__dict__", `class P:
    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.__dict__["extra"] = 1
    def to_dict(self):
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
p = P(a=1, b="two")
p.__dict__.setdefault("c", 3)
return [p.to_dict(), sorted(p.__dict__), len(p.__dict__), "a" in p.__dict__, p.c]`,
		nil, `[{"a": 1, "b": "two", "extra": 1, "c": 3}, ["a", "b", "c", "extra"], 4, true, 3]`},
	{"class __annotations__", `class Cfg:
    host: str = "h"
    port: int = 1
def schema(cls):
    return {k: v.__name__ for k, v in cls.__annotations__.items()}
def f(a: int) -> str:
    return ""
return [schema(Cfg), sorted(f.__annotations__)]`,
		nil, `[{"host": "str", "port": "int"}, ["a", "return"]]`},
	{"hasattr protocol dunders", `class Bag:
    def __init__(self):
        self.items = []
    def __len__(self):
        return len(self.items)
def describe(x):
    return [hasattr(x, "__dict__"), hasattr(x, "__iter__"), hasattr(x, "__len__"), hasattr(x, "__getitem__"), hasattr(x, "__call__")]
return [describe(Bag()), describe([1]), describe(3), describe(len), callable(len)]`,
		nil, `[[true, false, true, false, false], [false, true, true, true, false], [false, false, false, false, false], [false, false, false, false, true], true]`},
	{"OSError aliases", `def read():
    raise IOError("disk")
try:
    read()
except EnvironmentError as e:
    err = e
try:
    raise ValueError("x")
except ValueError as e:
    tb = e.with_traceback(None)
return [type(err).__name__, str(err), IOError is OSError, EnvironmentError is OSError, str(tb)]`,
		nil, `["OSError", "disk", true, true, "x"]`},
}

// TestLLMBodiesRun runs every llmBodies entry with classes on.
func TestLLMBodiesRun(t *testing.T) {
	for _, b := range llmBodies {
		t.Run(strings.ReplaceAll(b.name, " ", "_"), func(t *testing.T) {
			resp, _, _ := run(t, runner.Request{Code: b.code, AllowedImports: b.allow, Classes: true})
			wantOutput(t, resp, b.want)
		})
	}
}

package runner_test

// Classes and attribute writes in the runner, with the Go validator out of
// the path: the in-child checker and the run-time guards on their own.

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
)

func TestClassesRunWhenOn(t *testing.T) {
	for _, c := range []struct{ name, code, want string }{
		{"custom exception", "class ToolError(Exception):\n    def __init__(self, msg, code=1):\n        super().__init__(msg)\n        self.code = code\ntry:\n    raise ToolError('bad', 2)\nexcept ToolError as e:\n    return [str(e), e.code, type(e).__name__]", `["bad",2,"ToolError"]`},
		{"dataclass", "from dataclasses import dataclass, field, asdict\n@dataclass(order=True)\nclass Item:\n    name: str\n    qty: int = 0\n    tags: list = field(default_factory=list)\nreturn [asdict(i) for i in sorted([Item('b', 2), Item('a', 1)])]", `[{"name":"a","qty":1,"tags":[]},{"name":"b","qty":2,"tags":[]}]`},
		{"methods and properties", "class C:\n    def __init__(self):\n        self.xs = []\n    def __len__(self):\n        return len(self.xs)\n    @property\n    def n(self):\n        return len(self)\n    @classmethod\n    def of(cls, *xs):\n        c = cls()\n        c.xs.extend(xs)\n        return c\nreturn C.of(1, 2).n", `2`},
		{"positional pattern on a dataclass", "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\n    y: int\nmatch Point(1, 2):\n    case Point(0, y):\n        return y\n    case Point(x, y):\n        return x + y", `3`},
		{"function attribute", "def fib(n):\n    if n in fib.cache:\n        return fib.cache[n]\n    r = n if n < 2 else fib(n - 1) + fib(n - 2)\n    fib.cache[n] = r\n    return r\nfib.cache = {}\nreturn fib(40)", `102334155`},
		{"dict subclass result", "class D(dict):\n    def items(self):\n        raise RuntimeError('user code ran while encoding')\nd = D(a=1)\nreturn {'d': d, 'k': [D(b=2)]}", `{"d":{"a":1},"k":[{"b":2}]}`},
		{"str and int subclass result", "class S(str):\n    def __str__(self):\n        return 'changed'\nclass I(int):\n    def __repr__(self):\n        return 'changed'\nreturn [S('same'), I(3), {S('k'): 1}]", `["same",3,{"k":1}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, _, stderr := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: []string{"dataclasses"}})
			if !resp.Success {
				t.Fatalf("want success, got %s: %s\n%s", resp.ErrorKind, resp.Error, stderr)
			}
			var got, want any
			_ = json.Unmarshal(resp.Output, &got)
			_ = json.Unmarshal([]byte(c.want), &want)
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Fatalf("output %s, want %s", gb, wb)
			}
		})
	}
}

func TestClassesRefusedWhenOff(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "class A:\n    pass\nreturn 1"})
	if resp.Success || resp.ErrorKind != "validation" || !strings.Contains(resp.Error, "class-definition") {
		t.Fatalf("want a class-definition rejection, got success=%v %s: %s", resp.Success, resp.ErrorKind, resp.Error)
	}
}

// TestAttributeWritesGuarded: the static rules let attribute writes through
// (they refuse only writes to imported module names); the run-time guard
// refuses every object the body did not make.
func TestAttributeWritesGuarded(t *testing.T) {
	for _, c := range []struct{ name, code string }{
		{"stdlib class", "import json\nE = json.JSONEncoder\nE.encode = lambda self, o: 'x'\nreturn 1"},
		{"module view", "import json\nm = json\nm.dumps = len\nreturn 1"},
		{"stdlib instance", "import random\nr = random.Random(1)\nr.random = lambda: 0\nreturn 1"},
		{"namedtuple class", "from collections import namedtuple\nP = namedtuple('P', 'x')\nP.extra = 1\nreturn 1"},
		{"del on stdlib class", "import json\nE = json.JSONDecoder\ndel E.decode\nreturn 1"},
		{"aug write", "import fractions\nF = fractions.Fraction\nF.limit_denominator += 1\nreturn 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, _, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: []string{"json", "random", "collections", "fractions"}})
			if resp.Success || !strings.Contains(resp.Error, "cannot set or delete attributes") {
				t.Fatalf("want the write guard to refuse, got success=%v %s: %s", resp.Success, resp.ErrorKind, resp.Error)
			}
		})
	}
}

// TestExceptionStrRunsArmed: a user __str__ runs while the audit hook is
// armed (it is taken before the traceback is formatted), and the traceback
// shows the real class name with the text.
func TestExceptionStrRunsArmed(t *testing.T) {
	rules := weakRules(t, []string{"__traceback__"}, []string{"tb_frame", "f_globals"}, nil)
	code := "class E(Exception):\n    def __str__(self):\n        try:\n            return 'frames: ' + str(len(self.__traceback__.tb_frame.f_globals))\n        except RuntimeError as e:\n            return 'refused: ' + str(e)\nraise E()"
	resp, _, _ := run(t, runner.Request{Code: code, Rules: rules, Classes: true})
	if resp.Success || !strings.Contains(resp.Error, "E: refused: sandbox: introspection") {
		t.Fatalf("want the user __str__ to run armed and be refused, got %s: %s", resp.ErrorKind, resp.Error)
	}
	resp, _, _ = run(t, runner.Request{Code: "class E(ValueError):\n    def __str__(self):\n        return 'custom text'\ntry:\n    raise KeyError('k')\nexcept KeyError as k:\n    raise E() from k", Classes: true})
	if resp.Success || !strings.Contains(resp.Error, "KeyError: 'k'") || !strings.Contains(resp.Error, "direct cause") || !strings.Contains(resp.Error, "E: custom text") {
		t.Fatalf("want the chained traceback with real names, got %s", resp.Error)
	}
}

// TestDataclassGuard: annotation names that are not identifiers never reach
// dataclasses' code generation.
func TestDataclassGuard(t *testing.T) {
	code := "import dataclasses, typing\nT = typing.TypedDict('T', {'a: int = print(1), b': int})\ndataclasses.dataclass(T)\nreturn 1"
	resp, _, _ := run(t, runner.Request{Code: code, Classes: true, AllowedImports: []string{"dataclasses", "typing"}})
	if resp.Success || !strings.Contains(resp.Error, "field names must be plain identifiers") {
		t.Fatalf("want the dataclass guard to refuse, got success=%v %s: %s", resp.Success, resp.ErrorKind, resp.Error)
	}
}

// TestFormatGuard: str.format and str.format_map on templates the static
// rules cannot read (variables, str.format unbound, through map) format
// names and index keys into data, and refuse attribute fields and private
// keys at run time.
func TestFormatGuard(t *testing.T) {
	for _, c := range []struct{ name, code, want string }{
		{"template variable", "template = args['t']\nreturn template.format(**args['row'])", `"Hello Ann, 3"`},
		{"format_map", "fmt = args['t']\nreturn fmt.format_map(args['row'])", `"Hello Ann, 3"`},
		{"index into data", "t = '{u[name]}/{u[tags][0]}/{0[1]}'\nreturn t.format([5, 6], u={'name': 'Ann', 'tags': ['x']})", `"Ann/x/6"`},
		{"unbound and map", "t = '{0}-{1:>3}'\nreturn [str.format(t, 1, 2), list(map(t.format, [1], [2]))]", `["1-  2", ["1-  2"]]`},
		{"specs and conversions", "t = '{0!r:>6}|{x:.2f}|{{}}|{1}'\nreturn t.format('a', 7, x=3.14159)", `"   'a'|3.14|{}|7"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, _, _ := run(t, runner.Request{Code: c.code, Args: json.RawMessage(`{"t": "Hello {name}, {age}", "row": {"name": "Ann", "age": 3}}`)})
			if !resp.Success || string(resp.Output) != c.want {
				t.Fatalf("got success=%v %s (%s: %s), want %s", resp.Success, resp.Output, resp.ErrorKind, resp.Error, c.want)
			}
		})
	}
	for _, c := range []struct{ name, code, want string }{
		{"attribute field", "t = args['t']\ndef f():\n    pass\nreturn t.format(f)", "reads the attribute"},
		{"private key", "t = '{0[' + '_x]}'\nreturn t.format({'_x': 1})", "may not start with '_'"},
		{"unbound str.format", "return str.format(args['t'], len)", "reads the attribute"},
		{"format_map attribute", "t = args['t']\nreturn t.format_map({'a': len})", "reads the attribute"},
		{"through type()", "t = args['t']\nreturn type(t).format(t, len)", "reads the attribute"},
		{"nested spec", "t = '{0:{1.__class__}}'\nreturn t.format(1, 2)", "reads the attribute"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := `{"t": "{0.__globals__}"}`
			if c.name == "format_map attribute" {
				args = `{"t": "{a.__self__}"}`
			}
			resp, _, _ := run(t, runner.Request{Code: c.code, Args: json.RawMessage(args)})
			if resp.Success || !strings.Contains(resp.Error, c.want) {
				t.Fatalf("want the format guard to refuse (%q), got success=%v %s: %s", c.want, resp.Success, resp.ErrorKind, resp.Error)
			}
		})
	}
}

// TestPrivateAttributesGuarded: with classes on the static rules let
// private attributes through (self._x); the runner allows them only on
// what the body made, never inherited from a stdlib class.
func TestPrivateAttributesGuarded(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "class A:\n    _n = 1\n    def __init__(self):\n        self._x = A._n\n    def _get(self):\n        return self._x\ndef f():\n    pass\nf._memo = 2\nreturn [A()._get(), A._n, f._memo]", Classes: true})
	if !resp.Success || string(resp.Output) != "[1, 1, 2]" {
		t.Fatalf("own private attributes: %s %s: %s", resp.Output, resp.ErrorKind, resp.Error)
	}
	for _, c := range []struct{ name, code string }{
		{"inherited stdlib private", "import enum\nclass E(enum.Enum):\n    A = 1\nreturn E._convert_"},
		{"stdlib module view", "import random\nm = random\nreturn m._inst"},
		{"stdlib instance", "import random\nr = random.Random(1)\nreturn r._randbelow(3)"},
		{"unbound method on a foreign object", "import random\nclass A:\n    def peek(self):\n        return self._inst\nreturn A.peek(random)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, _, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: []string{"enum", "random"}})
			if resp.Success || !strings.Contains(resp.Error, "private attributes") {
				t.Fatalf("want the private-read guard to refuse, got success=%v %s: %s", resp.Success, resp.ErrorKind, resp.Error)
			}
		})
	}
	// setattr is guarded the same way as o.a = v.
	resp, _, _ = run(t, runner.Request{Code: "import json\nsetattr(json.JSONEncoder, 'encode', len)\nreturn 1", Classes: true, AllowedImports: []string{"json"}})
	if resp.Success || !strings.Contains(resp.Error, "cannot set or delete attributes") {
		t.Fatalf("setattr on a stdlib class: %s: %s", resp.ErrorKind, resp.Error)
	}
	resp, _, _ = run(t, runner.Request{Code: "class A:\n    pass\na = A()\nsetattr(a, 'x', 1)\nreturn a.x", Classes: true})
	if !resp.Success || string(resp.Output) != "1" {
		t.Fatalf("setattr on an own object: %s %s: %s", resp.Output, resp.ErrorKind, resp.Error)
	}
}

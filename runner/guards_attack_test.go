package runner_test

import (
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
)

// refused runs each body (classes on) and wants it refused with an error
// that contains want.
func refused(t *testing.T, rules []byte, allow []string, want string, bodies ...string) {
	t.Helper()
	for _, code := range bodies {
		resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: allow, Classes: true, Rules: rules})
		if resp.Success || !strings.Contains(resp.Error, want) {
			t.Errorf("%q: want a refusal containing %q, got success=%v %s %s", code, want, resp.Success, resp.Output, resp.Error)
		}
	}
}

// The guarded string.Formatter walks no attribute a template names, in
// any method and through any super(); with the static rules letting every
// dunder through, its methods lead to no runner globals. Index keys into
// data still work.
func TestFormatterGuardHoldsAlone(t *testing.T) {
	rules := weakRules(t, []string{"__class__", "__globals__", "__mro__", "__base__", "__subclasses__"}, nil, nil)
	allow := []string{"string"}
	refused(t, rules, allow, "reads the attribute",
		"import string\nreturn string.Formatter().format('{0.__class__}', 1)",
		"import string\nreturn string.Formatter().vformat('{0.real}', (1,), {})",
		"import string\nreturn str(string.Formatter().get_field('0.__class__.__mro__', (1,), {}))",
		"import string\nclass F(string.Formatter):\n    def get_field(self, name, a, k):\n        return super().get_field(name, a, k)\nreturn F().format('{0.__class__}', 1)",
		"import string\nclass F(string.Formatter):\n    pass\nreturn F().format('{x.__class__.__base__}', x=1)",
		"t = '{0.__class__}'\nreturn t.format(1)",
	)
	refused(t, rules, allow, "has no attribute",
		"import string\nclass F(string.Formatter):\n    pass\nreturn str(super(string.Formatter, F()).get_field('0.__class__', (1,), {}))",
	)
	resp, _, _ := run(t, runner.Request{Code: "import string\nreturn sorted(string.Formatter.get_field.__globals__)", AllowedImports: allow, Classes: true, Rules: rules})
	if resp.Success && string(resp.Output) != `["__builtins__"]` {
		t.Fatalf("Formatter.get_field.__globals__ = %s: the runner's globals", resp.Output)
	}
	resp, _, _ = run(t, runner.Request{Code: "import string\nreturn string.Formatter().format('{0[a]} {1!r:>4} {k}', {'a': 1}, 'x', k=2)", AllowedImports: allow, Classes: true})
	wantOutput(t, resp, `"1  'x' 2"`)
}

// The guarded typing.get_type_hints reads only the body's own functions'
// and classes' annotations and evaluates no string: a name neither bound
// in the function's globals nor a builtin class stays the string ('print'
// is not the builtin), and a string not written like a type (a call) is
// refused.
func TestGetTypeHintsGuardHoldsAlone(t *testing.T) {
	allow := []string{"typing", "json", "dataclasses"}
	refused(t, nil, allow, "only of classes and functions the code defines",
		"import typing, json\nreturn str(typing.get_type_hints(json.dumps))",
		"import typing, json\nreturn str(typing.get_type_hints(json))",
		"import typing, json\nreturn str(typing.get_type_hints(json.JSONDecoder))",
		"import typing\nclass C:\n    x: int\nreturn str(typing.get_type_hints(C()))",
	)
	refused(t, nil, allow, "evaluates no annotation",
		"import typing\ndef f(x: \"__import__('os').getcwd()\"):\n    pass\nreturn typing.get_type_hints(f)['x']",
		"import typing\nclass C:\n    x: '(1/0)'\nreturn typing.get_type_hints(C)",
	)
	code := "import typing\ndef f(x: 'Item', y: 'int', z: 'list[str] | None') -> None:\n    pass\nclass C:\n    a: 'typing.List[int]'\ndef g(p: 'print'):\n    pass\nh = typing.get_type_hints(f, {'int': str}, None)\nreturn [h['x'], h['y'].__name__, h['z'], h['return'] is type(None), typing.get_type_hints(C)['a'], typing.get_type_hints(g)['p']]"
	resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: allow, Classes: true})
	wantOutput(t, resp, `["Item", "int", "list[str] | None", true, "typing.List[int]", "print"]`)
}

// obj.__dict__ with classes: only of what the body made, as a snapshot
// whose writes go through to the real dict but refuse what setattr
// refuses; so no dunder key reaches an instance (copy.copy would call its
// __reduce_ex__), whatever the static rules say.
func TestOwnDictGuardHoldsAlone(t *testing.T) {
	rules := weakRules(t, []string{"__dict__", "__annotations__"}, nil, nil)
	allow := []string{"json", "copy", "decimal", "string"}
	refused(t, rules, allow, "readable only of",
		"import json\nm = json\nreturn sorted(m.__dict__)",
		"import json\nreturn sorted(json.__dict__)",
		"class C:\n    def m(self):\n        pass\nreturn sorted(C.__dict__)",
		"class C:\n    pass\nreturn sorted(type(C()).__dict__)",
		"return str(Exception('x').__dict__)",
		"import decimal\nreturn str(decimal.getcontext().__dict__)",
		"import string\nreturn str(string.Formatter().__dict__)",
		"import json\nf = json.dumps\nreturn str(f.__annotations__)",
		"return str(int.__dict__)",
	)
	refused(t, rules, allow, "not an attribute the sandbox lets code set",
		"class P:\n    pass\np = P()\np.__dict__[''.join(['__reduce', '_ex__'])] = len\nreturn 1",
		"class P:\n    pass\np = P()\np.__dict__.update({'__class__': int})\nreturn 1",
		"class P:\n    pass\np = P()\np.__dict__.update(**{''.join(['__get', 'attr__']): len})\nreturn 1",
		"class P:\n    pass\np = P()\np.__dict__.setdefault('__reduce__', len)\nreturn 1",
		"class P:\n    pass\np = P()\nd = p.__dict__\nd |= {'__copy__': len}\nreturn 1",
		"class P:\n    pass\np = P()\np.__dict__[''.join(['_', 'orq_x'])] = 1\nreturn 1",
	)
	// a write through the dict type itself reaches the snapshot only
	code := "import copy\nclass P:\n    pass\np = P()\nd = p.__dict__\ndict.__setitem__(d, '__reduce_ex__', lambda proto: (len, ('abc',)))\nreturn [type(copy.copy(p)).__name__, sorted(p.__dict__)]"
	resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: allow, Classes: true, Rules: rules})
	wantOutput(t, resp, `["P", []]`)
	// an annotations copy, not the class's
	code = "class C:\n    x: int\nC.__annotations__['y'] = str\nreturn sorted(C.__annotations__)"
	resp, _, _ = run(t, runner.Request{Code: code, Classes: true})
	wantOutput(t, resp, `["x"]`)
	// writes go through; deletes and pops too
	code = "class P:\n    pass\np = P()\nd = p.__dict__\nd['a'] = 1\nd.update(b=2)\nd.setdefault('c', 3)\ndel d['a']\nd.pop('b')\nreturn [sorted(vars(p)), p.c, hasattr(p, 'a')]"
	resp, _, _ = run(t, runner.Request{Code: code, Classes: true})
	wantOutput(t, resp, `[["c"], 3, false]`)
}

// ABCMeta.register on an ABC the body did not define changes isinstance
// for the whole process (the runner's next call in a session or on tier
// 0): refused however register is reached; the body's own ABCs register.
func TestABCRegisterOfLibraryABCsRefused(t *testing.T) {
	allow := []string{"io", "collections", "typing", "numbers", "functools"}
	refused(t, nil, allow, "register",
		"import io\nio.IOBase.register(int)\nreturn isinstance(1, io.IOBase)",
		"import collections.abc\ncollections.abc.Mapping.register(int)\nreturn 1",
		"import typing\ntyping.Mapping.register(int)\nreturn 1",
		"import numbers\nnumbers.Number.register(str)\nreturn 1",
		"import collections.abc\nlist(map(collections.abc.Sized.register, [int]))\nreturn 1",
		"import collections.abc, functools\nfunctools.partial(collections.abc.Hashable.register, list)()\nreturn 1",
		"import collections.abc\nM = collections.abc.Mapping\ntype(M).register(M, int)\nreturn 1",
	)
	code := "import collections.abc\nclass Shape(collections.abc.Sized):\n    def __len__(self):\n        return 0\nclass Sq:\n    pass\nShape.register(Sq)\ntry:\n    collections.abc.Mapping.register(int)\nexcept TypeError:\n    pass\nreturn [isinstance(Sq(), Shape), isinstance(1, collections.abc.Mapping)]"
	resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: allow, Classes: true})
	wantOutput(t, resp, `[true, false]`)
}

// Subclassing typing's internals with _root=True gave an instance whose
// __getattr__ forwards any name to its __origin__: the own-attribute
// reader let x._convert_ through (no class on the MRO defines it) and it
// reached re.RegexFlag._convert_, which rewrote json's module globals
// (json.dumps). The static rules and __build_class__ refuse the private
// keyword; the own-attribute reader alone reads only an instance's own
// dict.
func TestTypingAliasForwardingRefused(t *testing.T) {
	payload := "import typing, re\nA = type(typing.List[int])\nclass X(A, _root=True):\n    pass\nx = X(re.RegexFlag, (int,))\nx._convert_('dumps', 'json', lambda n: n == 'dumps')\nimport json\nreturn type(json.dumps).__name__"
	refused(t, nil, []string{"typing", "re", "json"}, "class-keyword", payload)
	out := runDriver(t, `
import json as _j, re, typing
ub = {}
env, made = _orq_env_builtins({}, ub, True)
res = []
try:
    env["__build_class__"](lambda: None, "X", type(typing.List[int]), _root=True)
    res.append("built")
except TypeError as e:
    res.append("private" in str(e))
A = type(typing.List[int])
class X(A, _root=True):
    pass
made[id(X)] = X
x = X(re.RegexFlag, (int,))
try:
    env["_orq_own"](x, "_convert_")
    res.append("passed")
except AttributeError:
    res.append("refused")
class P:
    pass
made[id(P)] = P
p = P()
p._mine = 1
res.append(env["_orq_own"](p, "_mine") is p)
try:
    env["_orq_own"](p, "_missing")
    res.append("passed")
except AttributeError:
    res.append("missing")
print(_j.dumps(res + [type(__import__("json").dumps).__name__]))
`)
	if out != `[true, "refused", true, "missing", "function"]` {
		t.Fatalf("got %s, want [true, \"refused\", true, \"missing\", \"function\"]", out)
	}
}

// A policy that allows socket gets socket.socket from the Python layer
// (the kernel wall of tier 1 still refuses the system call); without it
// the name is refused.
func TestSocketWhenAllowed(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "import socket\nreturn [callable(socket.socket), socket.AF_INET == 2]", AllowedImports: []string{"socket"}})
	wantOutput(t, resp, `[true, true]`)
	resp, _, _ = run(t, runner.Request{Code: "import socket\nreturn 1", AllowedImports: []string{"json"}})
	if resp.Success {
		t.Fatal("import socket without socket in the policy ran")
	}
}

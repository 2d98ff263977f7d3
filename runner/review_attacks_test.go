package runner_test

// Payloads of an attack review of the Python layer (tier 1's runner, one
// execution per process), each run against both audit hooks and, where the
// payload needs names the in-child checker refuses, with weakRules. Every
// test says which layer stops the payload; the Go validator's verdict is
// recorded too (goAccepts), so a payload that only a later layer stops is
// visible as such.

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/validator"
)

// goAccepts reports whether the Go validator (the host's and the plugin's
// static layer) accepts code with classes on and the given imports.
func goAccepts(t *testing.T, code string, imports []string) bool {
	t.Helper()
	return len(validator.New().CheckWith(context.Background(), code, imports, validator.Features{Classes: true})) == 0
}

// wantRefused fails unless resp is a refusal whose error contains want and
// that shows nothing of the runner or the real builtins.
func wantRefused(t *testing.T, resp runner.Response, stdout, want string) {
	t.Helper()
	wantNoEscape(t, resp, stdout)
	if resp.Success {
		t.Fatalf("want a refusal (%q), got %s", want, resp.Output)
	}
	if !strings.Contains(resp.Error, want) {
		t.Fatalf("want %q, got %s: %s", want, resp.ErrorKind, resp.Error)
	}
}

// TestReviewUserStringFormatFields: collections.UserString's format and
// format_map call its data's str.format from the library's frame, so the
// run-time format guard (which saw a UserString, not a str) handed out
// the real method: '{0.__globals__[codecs].sys.modules[os].environ}'
// read the process environment as a string (tier 0: the plugin's). Both
// static layers accept the payload (the template is not the receiver of
// .format); the format guard now follows UserString to its data, bound or
// unbound, nested or not. The benign side: index keys and specs work.
func TestReviewUserStringFormatFields(t *testing.T) {
	imports := []string{"collections", "json"}
	for _, c := range []struct{ name, code string }{
		{"bound format", "import collections, json\nreturn collections.UserString('{0.__globals__[codecs].sys.modules[os].environ}').format(json.loads)"},
		{"bound format_map", "import collections, json\nreturn collections.UserString('{a.__globals__}').format_map({'a': json.loads})"},
		{"unbound format", "import collections, json\nU = collections.UserString\nreturn U.format(U('{0.__globals__}'), json.loads)"},
		{"nested", "import collections, json\nU = collections.UserString\nreturn U(U(U('{0.__globals__}'))).format(json.loads)"},
		{"subclass via super", "import collections, json\nclass V(collections.UserString):\n    def f(self, x):\n        return super().format(x)\nreturn V('{0.__globals__}').f(json.loads)"},
		{"format_map as format", "import collections, json\nclass V(collections.UserString):\n    format = collections.UserString.format_map\nreturn V('{a.__globals__}').format({'a': json.loads})"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !goAccepts(t, c.code, imports) {
				t.Logf("the Go validator refuses %q too", c.name)
			}
			hooks(t, func(t *testing.T, hook string) {
				resp, out, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: imports})
				wantRefused(t, resp, out, "reads the attribute '__globals__'")
				if strings.Contains(resp.Error, "environ(") {
					t.Fatalf("the environment leaked: %s", resp.Error)
				}
			})
		})
	}
	benign := "import collections\nU = collections.UserString\nreturn [U('{0[k]} {n:>3}').format({'k': 'v'}, n=7), U('{n}!').format_map({'n': 1}), U.format(U('{}-{}'), 1, 2)]"
	if !goAccepts(t, benign, imports) {
		t.Fatal("the Go validator refuses the benign UserString body")
	}
	hooks(t, func(t *testing.T, hook string) {
		resp, _, _ := run(t, runner.Request{Code: benign, Classes: true, AllowedImports: imports})
		wantOutput(t, resp, `["v   7", "1!", "1-2"]`)
	})
}

// reduceDayName is a __reduce_ex__ whose reconstruction (copy's
// _reconstruct) sets an attribute of a library instance every call of an
// interpreter shares: calendar.day_name's format, so that a later
// calendar.day_name[0] says HACKED instead of Monday.
const reduceDayName = "lambda self, p: (lambda: calendar.day_name, (), (None, {'format': 'HACKED'}))"

// TestReviewClassGuardOutsideTheUserFrame: the C class guard checked a
// type() namespace only while the running frame was the user's, so a
// class whose namespace the code chose but that was built in another
// frame took any dunder: a Python metaclass's __new__ (type of an ABC:
// type(collections.abc.Mapping)(...)), type() called back through
// functools.partial by a dataclass default_factory, a partialmethod or a
// cached_property, the functional Enum API. With __reduce_ex__ (or a
// metaclass's __instancecheck__) copy.copy set attributes of library instances
// (calendar.day_name) for every later call of the interpreter. Both
// static layers accept the payloads; the C guard now holds a metaclass's
// __new__ called from the user's frame to the class-statement rules, and
// any other frame's namespace to binding no disallowed dunder to the
// code's functions (or objects, partials, methods wrapping them). The
// Python hook has no class guard (docs/threat-model.md): C hook only.
func TestReviewClassGuardOutsideTheUserFrame(t *testing.T) {
	imports := []string{"collections", "copy", "calendar", "dataclasses", "functools", "enum"}
	ns := "ns = {'__reduce_ex__': " + reduceDayName + "}\n"
	cases := []struct{ name, code, want string }{
		{"ABCMeta alias", "import collections.abc, copy, calendar\n" + ns +
			"R = type(collections.abc.Mapping)('R', (), ns)\ncopy.copy(R())\nreturn calendar.day_name[0]", "may not define __reduce_ex__"},
		{"ABCMeta alias metaclass", "import collections.abc\nM = type(collections.abc.Mapping)('M', (type(int),), {})\nreturn str(M)", "may not derive from type"},
		{"default_factory partial", "import dataclasses, functools, copy, calendar\n" + ns +
			"@dataclasses.dataclass\nclass H:\n    r: object = dataclasses.field(default_factory=functools.partial(type(int), 'R', (), ns))\n" +
			"copy.copy(H().r())\nreturn calendar.day_name[0]", "may not bind __reduce_ex__"},
		{"partialmethod", "import functools, copy, calendar\n" + ns +
			"class S(str):\n    m = functools.partialmethod(type(int), (), ns)\ncopy.copy(S('R').m()())\nreturn calendar.day_name[0]", "may not bind __reduce_ex__"},
		{"functional Enum", "import enum, copy, calendar\nE = enum.Enum('E', {'A': 1, '__reduce_ex__': " + reduceDayName + "})\ncopy.copy(E.A)\nreturn calendar.day_name[0]", "may not bind __reduce_ex__"},
		{"cached_property metaclass", "import functools\nT = type(int)\nclass D(dict):\n    m = functools.cached_property(functools.partial(T, 'M', (T,)))\n" +
			"M = D({'__instancecheck__': lambda c, x: True}).m\nreturn str(M)", "may not bind __instancecheck__"},
		{"partial of a lambda", "import functools, copy, calendar\nf = functools.partial(" + reduceDayName + ")\n" +
			"class D(dict):\n    m = functools.cached_property(functools.partial(type(int), 'R', ()))\nR = D({'__reduce_ex__': f}).m\ncopy.copy(R())\nreturn calendar.day_name[0]", "may not bind __reduce_ex__"},
		{"bound method of an own object", "import functools, copy, calendar\nclass K:\n    def r(self, me, p):\n        return (lambda: calendar.day_name, (), (None, {'format': 'HACKED'}))\n" +
			"class D(dict):\n    m = functools.cached_property(functools.partial(type(int), 'R', ()))\nR = D({'__reduce_ex__': K().r}).m\ncopy.copy(R())\nreturn calendar.day_name[0]", "may not bind __reduce_ex__"},
	}
	// Library wrappers that call the code's function back: singledispatch
	// (its registry, a dict in a closure), lru_cache, wraps.
	for _, w := range []string{"functools.singledispatch(r)", "functools.lru_cache(r)", "functools.wraps(r)(lambda *a: r(*a))"} {
		cases = append(cases, struct{ name, code, want string }{w, "import functools, copy, calendar\ndef r(self, p):\n    return (lambda: calendar.day_name, (), (None, {'format': 'HACKED'}))\n" +
			"class D(dict):\n    m = functools.cached_property(functools.partial(type(int), 'R', ()))\nR = D({'__reduce_ex__': " + w + "}).m\ncopy.copy(R())\nreturn calendar.day_name[0]", "may not bind __reduce_ex__"})
	}
	// Values that look inert but run the code's data: a class the code
	// built (its __iter__ yields the reduction), a builtin method bound to
	// the code's dict or unbound on the instance (a key's __eq__ says yes
	// to 4), a staticmethod of one, a library method of another name
	// (UserDict.get) run on the code's instance.
	lying := "import functools, copy, calendar, collections\ntup = (lambda: calendar.day_name, (), (None, {'format': 'HACKED'}))\n" +
		"class K:\n    def __eq__(self, o):\n        return True\n    def __hash__(self):\n        return hash(4)\n" +
		"class It:\n    def __init__(self, p):\n        pass\n    def __iter__(self):\n        return iter(tup)\nD = {K(): tup}\n"
	for _, v := range []struct{ name, value, bases, make string }{
		{"a class of the code", "It", "()", "R()"},
		{"bound dict.get", "D.get", "()", "R()"},
		{"unbound dict.get", "dict.get", "(dict,)", "R({K(): tup})"},
		{"staticmethod of a bound get", "staticmethod(D.get)", "()", "R()"},
		{"a library method of another name", "collections.UserDict.get", "(collections.UserDict,)", "R({K(): tup})"},
	} {
		cases = append(cases, struct{ name, code, want string }{v.name, lying +
			"class Mk(dict):\n    m = functools.cached_property(functools.partial(type(int), 'R', " + v.bases + "))\n" +
			"R = Mk({'__reduce_ex__': " + v.value + "}).m\ncopy.deepcopy(" + v.make + ")\nreturn calendar.day_name[0]", "may not bind __reduce_ex__"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !goAccepts(t, c.code, imports) {
				t.Logf("the Go validator refuses %q too", c.name)
			}
			if os.Getenv("ORQEST_FORKCORE") == "" {
				t.Skip("SKIP: ORQEST_FORKCORE is not set (the C class guard, built by `make forkcore`)")
			}
			resp, out, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: imports})
			wantRefused(t, resp, out, c.want)
		})
	}
}

// TestReviewClassesLibrariesBuild: the benign side: the classes the
// allowed libraries build for the code, in their own frames or a
// metaclass's __new__ (Enum, IntFlag, StrEnum, TypedDict, NamedTuple,
// Generic, Protocol, an ABC, a frozen slots dataclass, namedtuple,
// cached_property, the functional Enum), on both hooks.
func TestReviewClassesLibrariesBuild(t *testing.T) {
	code := `import enum, typing, collections, collections.abc, dataclasses, functools
class Color(enum.Enum):
    RED = 1
class Perm(enum.IntFlag):
    R = 4
    W = 2
class Unit(enum.StrEnum):
    M = 'm'
class TD(typing.TypedDict, total=False):
    a: int
class P(typing.NamedTuple):
    x: int
    y: int = 0
T = typing.TypeVar('T')
class G(typing.Generic[T]):
    def __init__(self, v):
        self.v = v
@typing.runtime_checkable
class Proto(typing.Protocol):
    def name(self) -> str: ...
class M(collections.abc.Mapping):
    def __init__(self, d):
        self.d = d
    def __getitem__(self, k):
        return self.d[k]
    def __iter__(self):
        return iter(self.d)
    def __len__(self):
        return len(self.d)
@dataclasses.dataclass(frozen=True, slots=True)
class F:
    a: int
    b: list = dataclasses.field(default_factory=list)
Pt = collections.namedtuple('Pt', 'x y')
class Cached:
    @functools.cached_property
    def v(self):
        return 3
E2 = enum.Enum('E2', 'A B')
return [Color.RED.name, int(Perm.R | Perm.W), Unit.M.value, TD(a=1), P(1)._asdict(), G(2).v, isinstance(1, Proto), dict(M({'a': 1})), F(1).a, Pt(1, 2).y, Cached().v, E2.B.value]`
	imports := []string{"enum", "typing", "collections", "dataclasses", "functools"}
	if !goAccepts(t, code, imports) {
		t.Fatal("the Go validator refuses the benign body")
	}
	hooks(t, func(t *testing.T, hook string) {
		resp, _, _ := run(t, runner.Request{Code: code, Classes: true, AllowedImports: imports})
		wantOutput(t, resp, `["RED", 6, "m", {"a": 1}, {"x": 1, "y": 0}, 2, false, {"a": 1}, 1, 2, 3, 2]`)
	})
}

// raiseFromStr is a body whose exception's __str__ raises a BaseException
// (whose own __str__ raises again): the runner's report took texts under
// `except Exception`, so the BaseException escaped the runner's handlers.
// A one-shot child then wrote no response (the host saw a crash, with the
// runner's own traceback on stderr), a session's interpreter ended with
// its state, and tier 0 formatted the escaped object in C after
// disarming (review_tier0_test.go).
const raiseFromStr = "class Bye(BaseException):\n    def __str__(self):\n        raise Bye()\nclass E(Exception):\n    def __str__(self):\n        raise Bye()\nraise E()"

// TestReviewExceptionStrRaisesBaseException: the report says the text
// failed and the call ends as a runtime error, on both hooks.
func TestReviewExceptionStrRaisesBaseException(t *testing.T) {
	if !goAccepts(t, raiseFromStr, nil) {
		t.Fatal("the Go validator refuses the body (it needs only classes)")
	}
	hooks(t, func(t *testing.T, hook string) {
		resp, out, _ := run(t, runner.Request{Code: raiseFromStr, Classes: true})
		wantRefused(t, resp, out, "E: <exception str() failed>")
		if resp.ErrorKind != "runtime" {
			t.Fatalf("want a runtime error, got %s: %s", resp.ErrorKind, resp.Error)
		}
	})
}

// TestReviewJailClassics: published Python-jail moves, on tier 1's runner
// with no imports and classes on. Each is refused by some layer (recorded:
// the Go validator, the in-child checker, or a run-time guard) and shows
// nothing of the runner; the few that run hand out only what the code had.
func TestReviewJailClassics(t *testing.T) {
	for _, c := range []struct{ name, code, want string }{
		{"mro of type", "return str(type(int).mro(type(int)))", ""},
		{"subclasses", "return str(object.__subclasses__())", ""},
		{"generator frame", "g = (x for x in [1])\nreturn str(g.gi_frame)", ""},
		{"yieldfrom", "def f():\n    yield\ng = f()\nreturn str(g.gi_yieldfrom)", ""},
		{"coroutine frame", "async def f():\n    return 1\nc = f()\nr = str(c.cr_frame)\nc.close()\nreturn r", ""},
		{"traceback", "try:\n    1/0\nexcept Exception as e:\n    return str(e.__traceback__)", ""},
		{"getattr self", "return str(getattr(len, '__self__'))", ""},
		{"getattr closure computed", "n = '__clos' + 'ure__'\nreturn str(getattr(setattr, n))", ""},
		{"getattr closure joined", "n = ''.join(['__clos', 'ure__'])\nreturn str(getattr(setattr, n))", ""},
		{"vars of a builtin", "return str(vars(len))", ""},
		{"vars of a class", "class A:\n    pass\nreturn str(vars(A))", ""},
		{"super's class", "class A:\n    def f(self):\n        return super()\nreturn str(A().f().__self_class__)", ""},
		{"builtin self", "return str(isinstance.__self__)", ""},
		{"defaults", "def f(a=1):\n    return a\nf.__defaults__ = (len,)\nreturn str(f())", ""},
		{"globals", "def f():\n    return 1\nreturn str(f.__globals__)", ""},
		{"function type", "F = type(lambda: 0)\nreturn str(F(compile, {}))", ""},
		{"metaclass statement", "class M(type):\n    pass\nreturn 1", ""},
		{"type getattr", "return str(type(int)('X', (), {'__getattr__': lambda s, n: n})().y)", "may not define __getattr__"},
		{"keyword pattern", "match len:\n    case object(__self__=s):\n        return str(s)\nreturn 0", ""},
		{"match_args statement", "class C:\n    __match_args__ = ('__self__',)\nreturn 1", ""},
		{"str subclass format", "class A(str):\n    pass\nreturn str(A('{0.__class__}').format(1))", "reads the attribute"},
		{"computed template", "t = '{0.__cl' + 'ass__}'\nreturn t.format(1)", ""},
		{"unbound str.format", "f = str.format\nreturn f('{0.__class__}', 1)", "reads the attribute"},
		{"map str.format", "return str(list(map(str.format, ['{0.__class__}'], [1])))", "reads the attribute"},
		{"set_name by hand", "import functools\ncp = functools.cached_property(len)\nclass A:\n    pass\ncp.__set_name__(A, '__reduce_ex__')\nreturn 1", ""},
		{"dataclass dunder field", "import dataclasses\nC = dataclasses.dataclass(type(int)('C', (), {'__annotations__': {'__reduce_ex__': object}}))\nreturn 1", "field names must be plain identifiers"},
	} {
		t.Run(c.name, func(t *testing.T) {
			imports := []string{"functools", "dataclasses"}
			goOK := goAccepts(t, c.code, imports)
			resp, out, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: imports})
			wantNoEscape(t, resp, out)
			if resp.Success {
				t.Fatalf("want a refusal, got %s", resp.Output)
			}
			if c.want != "" && !strings.Contains(resp.Error, c.want) {
				t.Fatalf("want %q, got %s: %s", c.want, resp.ErrorKind, resp.Error)
			}
			t.Logf("Go validator accepts: %v; stopped by: %s", goOK, resp.ErrorKind)
		})
	}
	// Frames with the static rules out of the way: the C hook (or the
	// Python one) refuses the read itself.
	rules := weakRules(t, []string{"__traceback__"}, []string{"gi_frame", "cr_frame", "tb_frame", "gi_yieldfrom"}, nil)
	for _, code := range []string{
		"g = (x for x in [1])\nreturn str(g.gi_frame)",
		"async def f():\n    return 1\nc = f()\ntry:\n    return str(c.cr_frame)\nfinally:\n    c.close()",
		"try:\n    1/0\nexcept Exception as e:\n    return str(e.__traceback__.tb_frame)",
	} {
		hooks(t, func(t *testing.T, hook string) {
			resp, out, _ := run(t, runner.Request{Code: code, Classes: true, Rules: rules})
			wantRefused(t, resp, out, "sandbox: introspection")
		})
	}
	// What runs hands out only what the code had.
	hooks(t, func(t *testing.T, hook string) {
		resp, _, _ := run(t, runner.Request{Code: "class S(str):\n    def __hash__(self):\n        return 1\n    def __eq__(self, o):\n        return True\nclass L(list):\n    def __iter__(self):\n        return iter(['EVIL'])\nclass F(float):\n    def __repr__(self):\n        return 'EVIL'\nreturn [{S('a'): 1, S('b'): 2}, L([1, 2]), F(1.5), str(property(len).fget)]", Classes: true})
		wantOutput(t, resp, `[{"a": 2}, [1, 2], 1.5, "<built-in function len>"]`)
	})
}

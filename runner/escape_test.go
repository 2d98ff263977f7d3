package runner_test

// Paths from user code to the real builtins that no static pattern named,
// each run with the static checkers out of the way (the Go validator is
// not in this path; weakRules lets the in-child checker pass the names the
// payload needs) and against both audit hooks: the C one (audit.h, when
// ORQEST_FORKCORE names the shared object; skipped loudly without it) and
// the Python fallback.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/validator"
)

// hooks runs f once per audit hook: "c" (skipped without ORQEST_FORKCORE)
// and "python".
func hooks(t *testing.T, f func(t *testing.T, hook string)) {
	t.Helper()
	t.Run("c", func(t *testing.T) {
		if os.Getenv("ORQEST_FORKCORE") == "" {
			t.Skip("SKIP: ORQEST_FORKCORE is not set (the C audit hook, built by `make forkcore`)")
		}
		t.Setenv("ORQEST_NO_CORE", "")
		f(t, "c")
	})
	t.Run("python", func(t *testing.T) {
		t.Setenv("ORQEST_NO_CORE", "1")
		f(t, "python")
	})
}

// wantNoEscape fails unless resp is a refusal that shows nothing of the
// runner or the real builtins.
func wantNoEscape(t *testing.T, resp runner.Response, stdout string) {
	t.Helper()
	all := string(resp.Output) + resp.Error + stdout
	for _, leak := range []string{"_orq_", "__import__", "<module 'builtins'", "ESCAPED"} {
		if strings.Contains(all, leak) {
			t.Fatalf("escaped (%q): success=%v %s: %s\noutput %s\nstdout %s", leak, resp.Success, resp.ErrorKind, resp.Error, resp.Output, stdout)
		}
	}
}

// TestClassPatternThroughTypeMetaclass: type(int) is the real type; three
// arguments build a metaclass whose __instancecheck__ accepts everything
// and a base whose __match_args__ (a dict-literal key) names __self__;
// case C(v) on len would read len.__self__ (the builtins module).
func TestClassPatternThroughTypeMetaclass(t *testing.T) {
	code := `T = type(int)
M = T('M', (T,), {'__instancecheck__': lambda c, x: True})
B = M('B', (), {'__match_args__': ('__self__',)})
class C(B):
    pass
match len:
    case C(v):
        return repr(v)
return 'ESCAPED-no-match'`
	hooks(t, func(t *testing.T, hook string) {
		resp, out, _ := run(t, runner.Request{Code: code, Classes: true})
		wantNoEscape(t, resp, out)
		if resp.Success {
			t.Fatalf("want a refusal, got %s", resp.Output)
		}
		want := "__match_args__ names '__self__'"
		if hook == "c" {
			want = "may not derive from type"
		}
		if !strings.Contains(resp.Error, want) {
			t.Fatalf("want %q, got %s: %s", want, resp.ErrorKind, resp.Error)
		}
	})
}

// TestMatchArgsFromAnywhere: __match_args__ from a dataclass's field names
// (identifiers, not dunders) or a type() namespace is checked when the
// pattern is tried: a forbidden name never reaches the C-level getattr.
func TestMatchArgsFromAnywhere(t *testing.T) {
	for _, c := range []struct{ name, code string }{
		{"dataclass fields", "import dataclasses\n@dataclasses.dataclass\nclass C:\n    gi_frame: int\ndef g():\n    yield 1\nx = C(1)\nmatch x:\n    case C(f):\n        return repr(f)\nreturn 0"},
		{"type namespace", "T = type(int)\nB = T('B', (), {'__match_args__': ('__class__',)})\nmatch B():\n    case B(k):\n        return repr(k)\nreturn 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hooks(t, func(t *testing.T, hook string) {
				resp, out, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: []string{"dataclasses"}})
				wantNoEscape(t, resp, out)
				if resp.Success {
					t.Fatalf("want a refusal, got %s", resp.Output)
				}
			})
		})
	}
	// A keyword sub-pattern names its attribute in the source: checked
	// before the body runs.
	resp, _, _ := run(t, runner.Request{Code: "def g():\n    yield 1\nmatch g():\n    case object(gi_frame=f):\n        return 1\nreturn 0", Rules: weakRules(t, nil, nil, nil)})
	if resp.Success || !strings.Contains(resp.Error, "gi_frame") {
		t.Fatalf("want the keyword pattern refused, got success=%v %s: %s", resp.Success, resp.ErrorKind, resp.Error)
	}
}

// TestClassPatternsStillMatch: the benign side of the class-pattern guard.
func TestClassPatternsStillMatch(t *testing.T) {
	code := `import dataclasses
@dataclasses.dataclass
class Point:
    x: int
    y: int
class S(str):
    pass
out = []
for v in [Point(1, 2), 3, 'a', S('b'), [1, 2], {'k': 1}, 2.5]:
    match v:
        case Point(x, y=yy):
            out.append(['point', x, yy])
        case int(n):
            out.append(['int', n])
        case S(s):
            out.append(['S', s])
        case str(s):
            out.append(['str', s])
        case [a, b]:
            out.append(['list', a, b])
        case {'k': k}:
            out.append(['dict', k])
        case float():
            out.append(['float'])
return out`
	hooks(t, func(t *testing.T, hook string) {
		resp, _, _ := run(t, runner.Request{Code: code, Classes: true, AllowedImports: []string{"dataclasses"}})
		wantOutput(t, resp, `[["point", 1, 2], ["int", 3], ["str", "a"], ["S", "b"], ["list", 1, 2], ["dict", 1], ["float"]]`)
	})
}

// TestExceptionReportRunsArmed: the exception's text is taken, and its
// report built, with the audit hook armed: a __str__ (a type()-built
// exception's) that walks frames to the runner's globals is refused, and a
// metaclass property of the class's names never runs.
func TestExceptionReportRunsArmed(t *testing.T) {
	rules := weakRules(t, []string{"__traceback__"}, []string{"tb_frame", "f_back", "f_globals"}, nil)
	for _, c := range []struct{ name, code string }{
		{"__str__ walks frames", "def s(self):\n    return repr(sorted(self.__traceback__.tb_frame.f_back.f_globals))\nT = type(int)\nE = T('E', (Exception,), {'__str__': s})\nraise E('x')"},
		{"metaclass property", "T = type(int)\ndef leak(c):\n    try:\n        raise ValueError()\n    except ValueError as e:\n        return repr(sorted(e.__traceback__.tb_frame.f_back.f_globals))\nM = T('M', (T,), {'__module__': property(leak), '__qualname__': property(leak)})\nE = M('E', (Exception,), {})\nraise E('x')"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hooks(t, func(t *testing.T, hook string) {
				resp, out, _ := run(t, runner.Request{Code: c.code, Classes: true, Rules: rules})
				wantNoEscape(t, resp, out)
				if resp.Success || resp.ErrorKind != "runtime" {
					t.Fatalf("want a runtime error, got success=%v %s: %s", resp.Success, resp.ErrorKind, resp.Error)
				}
			})
		})
	}
}

// TestResultNeverCallsUserMethods: a type()-built dict subclass's items()
// and a list subclass's __iter__ never run when the result is encoded;
// the builtin types' own methods read them.
func TestResultNeverCallsUserMethods(t *testing.T) {
	code := "T = type(int)\nD = T('D', (dict,), {'items': lambda self: [('ESCAPED', 1)], 'keys': lambda self: ['ESCAPED']})\n" +
		"L = T('L', (list,), {'__iter__': lambda self: iter(['ESCAPED'])})\n" +
		"return D(a=L([1, 2]))"
	hooks(t, func(t *testing.T, hook string) {
		resp, _, _ := run(t, runner.Request{Code: code})
		wantOutput(t, resp, `{"a": [1, 2]}`)
	})
}

// TestCopyCannotSetLibraryAttributes: copy's reconstruction of an object
// whose __reduce_ex__ the code chose sets attributes on what the callable
// returns; on a library class or function (here collections.abc.Callable's
// __match_args__ and a function's __defaults__) that is refused.
func TestCopyCannotSetLibraryAttributes(t *testing.T) {
	for _, c := range []struct{ name, code string }{
		{"library class", "import copy, collections.abc\nR = type('R', (), {'__reduce_ex__': lambda self, p: (lambda: collections.abc.Callable, (), (None, {'__match_args__': ('__self__',)}))})\ncopy.copy(R())\nreturn repr(getattr(collections.abc.Callable, '__match_args__', 'ok'))"},
		{"function defaults", "import copy, json\nR = type('R', (), {'__reduce_ex__': lambda self, p: (lambda: json.dumps, (), (None, {'__defaults__': (1,)}))})\ncopy.copy(R())\nreturn 'ESCAPED'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hooks(t, func(t *testing.T, hook string) {
				if hook == "python" {
					t.Skip("SKIP: the Python hook does not know which classes the code built; the C hook does")
				}
				resp, out, _ := run(t, runner.Request{Code: c.code, AllowedImports: []string{"copy", "collections", "json"}, Rules: weakRules(t, []string{"__match_args__"}, nil, nil)})
				wantNoEscape(t, resp, out)
				if resp.Success && string(resp.Output) != `"'ok'"` {
					t.Fatalf("copy set a library attribute: %s", resp.Output)
				}
			})
		})
	}
	// Benign: copying the code's own objects and data.
	hooks(t, func(t *testing.T, hook string) {
		code := "import copy, dataclasses\n@dataclasses.dataclass\nclass P:\n    x: list\np = P([1])\nq = copy.deepcopy(p)\nq.x.append(2)\nd = copy.copy({'a': [1]})\nreturn [p.x, q.x, d]"
		resp, _, _ := run(t, runner.Request{Code: code, Classes: true, AllowedImports: []string{"copy", "dataclasses"}})
		wantOutput(t, resp, `[[1], [1, 2], {"a": [1]}]`)
	})
}

// TestThreeArgumentTypeFollowsClassRules: with the C hook a type() call in
// the user's code builds only what a class statement may: no metaclass, no
// dunder a class body may not define. Classes built by library code
// (namedtuple, Enum) and class statements are unaffected.
func TestThreeArgumentTypeFollowsClassRules(t *testing.T) {
	hooks(t, func(t *testing.T, hook string) {
		if hook == "python" {
			t.Skip("SKIP: type.__new__ is guarded in C only")
		}
		for _, code := range []string{
			"T = type(int)\nreturn repr(T('X', (), {'__getattribute__': lambda s, n: 1}))",
			"T = type(int)\nreturn repr(T('X', (), {'__reduce_ex__': lambda s, p: 1}))",
			"T = type(int)\nreturn repr(T('M', (T,), {}))",
		} {
			resp, out, _ := run(t, runner.Request{Code: code})
			wantNoEscape(t, resp, out)
			if resp.Success || !strings.Contains(resp.Error, "in the sandbox") {
				t.Fatalf("%q: want a refusal, got success=%v %s: %s", code, resp.Success, resp.ErrorKind, resp.Error)
			}
		}
	})
	hooks(t, func(t *testing.T, hook string) {
		code := "import collections, enum\nP = collections.namedtuple('P', 'x y')\nclass Unit(enum.Enum):\n    M = 'm'\n    KM = 'km'\nclass A:\n    def __init__(self):\n        self.v = 1\nT = type(A)\nX = T('X', (A,), {'w': 2, '__doc__': 'd'})\nA.k = 3\nreturn [P(1, 2).y, Unit('km').name, A().v, X.w, A.k, type(3).__name__]"
		resp, _, _ := run(t, runner.Request{Code: code, Classes: true, AllowedImports: []string{"collections", "enum"}})
		wantOutput(t, resp, `[2, "KM", 1, 2, 3, "int"]`)
	})
}

// TestHookStaysArmedAfterTheBody: in a process of one execution nothing
// disarms the hook once the body has run: a generator's finally block
// that runs when the report is built is still refused.
func TestHookStaysArmedAfterTheBody(t *testing.T) {
	rules := weakRules(t, nil, []string{"open"}, []string{"open"})
	code := "def g():\n    try:\n        yield 1\n    finally:\n        print(open('/etc/hostname').read()[:0] + 'ESCAPED-open')\nx = g()\nnext(x)\nkeep = [x]\nraise ValueError('boom')"
	hooks(t, func(t *testing.T, hook string) {
		resp, out, _ := run(t, runner.Request{Code: code, Rules: rules})
		wantNoEscape(t, resp, out)
		if resp.Success || !strings.Contains(resp.Error, "ValueError") {
			t.Fatalf("want the ValueError, got success=%v %s: %s", resp.Success, resp.ErrorKind, resp.Error)
		}
	})
}

// TestAllowedModulesCannotChangeLibraryClasses: helpers of allowed
// modules that set attributes on the class they are given
// (dataclasses.dataclass, functools.total_ordering) refuse a library class
// under the C hook, and work on the code's own classes.
func TestAllowedModulesCannotChangeLibraryClasses(t *testing.T) {
	hooks(t, func(t *testing.T, hook string) {
		if hook == "python" {
			t.Skip("SKIP: the Python hook does not know which classes the code built; the C hook does")
		}
		for _, code := range []string{
			"import dataclasses, json\ndataclasses.dataclass(json.JSONEncoder)\nreturn 'ESCAPED'",
		} {
			resp, out, _ := run(t, runner.Request{Code: code, Classes: true, AllowedImports: []string{"functools", "json", "dataclasses"}})
			wantNoEscape(t, resp, out)
			if resp.Success || !strings.Contains(resp.Error, "the code did not create") {
				t.Fatalf("%q: want the C hook's refusal, got success=%v %s: %s", code, resp.Success, resp.ErrorKind, resp.Error)
			}
		}
	})
	hooks(t, func(t *testing.T, hook string) {
		code := "import functools\n@functools.total_ordering\nclass V:\n    def __init__(self, n):\n        self.n = n\n    def __eq__(self, o):\n        return self.n == o.n\n    def __lt__(self, o):\n        return self.n < o.n\nreturn [V(1) <= V(2), V(3) >= V(4)]"
		resp, _, _ := run(t, runner.Request{Code: code, Classes: true, AllowedImports: []string{"functools"}})
		wantOutput(t, resp, `[true, false]`)
	})
}

// TestClassPatternKeywordDunder: a keyword sub-pattern naming a dunder
// (__self__ of a builtin function: the builtins module) is refused when
// the body is compiled, with the in-child checker replaced by one that
// accepts everything: the static rules are not what stops it.
func TestClassPatternKeywordDunder(t *testing.T) {
	out := pyUnit(t, "import json\nrules = json.loads("+strconvQuote(string(validator.RulesJSON()))+")\n"+
		"ns['_orq_check'] = lambda *a: []\n"+
		"code, failed = ns['_orq_accept']('match len:\\n    case object(__self__=m):\\n        return m\\n', [], rules)\n"+
		"print(code is None, failed[0] if failed else None, '__self__' in (failed or ('', ''))[1])\n")
	if strings.TrimSpace(out) != "True validation True" {
		t.Fatalf("want the keyword pattern refused at compile time, got %q", out)
	}
}

// TestOSErrorClasses: the OS exception classes library code raises are
// builtins, so except clauses can name them.
func TestOSErrorClasses(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "out = []\nfor e in (OSError, FileNotFoundError, PermissionError, TimeoutError):\n    try:\n        raise e('x')\n    except OSError as x:\n        out.append(type(x).__name__)\nreturn out"})
	wantOutput(t, resp, `["OSError", "FileNotFoundError", "PermissionError", "TimeoutError"]`)
}

// TestOwnAttributeNamesLikeInternalOnes: names that are only scalars on a
// code object, frame or generator (co_name, f_lineno, gi_running) are the
// code's own attribute names; the ones that lead to frames, globals or code
// stay refused, statically and by name at run time.
func TestOwnAttributeNamesLikeInternalOnes(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "class Job:\n    def __init__(self, name):\n        self.co_name = name\n        self.f_lineno = 3\n        self.gi_running = False\nj = Job('etl')\nreturn [j.co_name, j.f_lineno, j.gi_running, getattr(j, 'co_name')]", Classes: true})
	wantOutput(t, resp, `["etl", 3, false, "etl"]`)
	for _, code := range []string{
		"def g():\n    yield 1\nreturn str(g().gi_frame)",
		"def g():\n    yield 1\nreturn str(getattr(g(), 'gi_' + 'frame'))",
	} {
		resp, _, _ := run(t, runner.Request{Code: code})
		if resp.Success {
			t.Fatalf("%q: want a refusal, got %s", code, resp.Output)
		}
	}
}

// TestTypeAsAnnotation: `type` in an annotation names the class, in both
// checkers; called there with three arguments it is still refused.
func TestTypeAsAnnotation(t *testing.T) {
	resp, _, _ := run(t, runner.Request{Code: "def reg(m: dict[str, type], k: str) -> type | None:\n    return m.get(k)\nkinds: list[type] = [int, str]\nreturn [reg({'i': int}, 'i') is kinds[0], reg({}, 'x') is None]"})
	wantOutput(t, resp, `[true, true]`)
	resp, _, _ = run(t, runner.Request{Code: "def f(x: type('X', (), {})):\n    return x\nreturn 1"})
	if resp.Success || !strings.Contains(resp.Error, "reflection-builtin") {
		t.Fatalf("want the in-child checker to refuse, got success=%v %s: %s", resp.Success, resp.ErrorKind, resp.Error)
	}
}

// TestObjectSetattrGuarded: object.__setattr__(self, ...) in a frozen
// dataclass's __post_init__ works; on an object the code did not make
// (uuid's shared namespace constants, immutable by their own
// __setattr__) or with a name the rules forbid it is refused.
func TestObjectSetattrGuarded(t *testing.T) {
	hooks(t, func(t *testing.T, hook string) {
		code := "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass P:\n    x: int\n    y: int = 0\n    def __post_init__(self):\n        object.__setattr__(self, 'y', self.x * 2)\nclass Q:\n    def __setattr__(self, name, value):\n        super().__setattr__(name, value * 10)\nq = Q()\nq.v = 1\np = P(2)\nreturn [dataclasses.asdict(p), [f.name for f in dataclasses.fields(p)], q.v]"
		resp, _, _ := run(t, runner.Request{Code: code, Classes: true, AllowedImports: []string{"dataclasses"}})
		wantOutput(t, resp, `[{"x": 2, "y": 4}, ["x", "y"], 10]`)
		for _, c := range []struct{ code, want string }{
			{"import uuid\nobject.__setattr__(uuid.NAMESPACE_DNS, 'int', 5)\nreturn 'ESCAPED'", "cannot set or delete attributes"},
			{"class A:\n    pass\na = A()\nobject.__setattr__(a, '__class__', int)\nreturn 'ESCAPED'", "not an attribute the sandbox lets code set"},
		} {
			resp, out, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: []string{"uuid"}})
			wantNoEscape(t, resp, out)
			if resp.Success || !strings.Contains(resp.Error, c.want) {
				t.Fatalf("%q: want %q, got success=%v %s: %s", c.code, c.want, resp.Success, resp.ErrorKind, resp.Error)
			}
		}
	})
}

// TestLibraryKeepsItsOwnClassCaches: under the C hook a package's own code
// may fill one of its classes' empty caches (a name the class body binds
// to None, given an inert value), as libraries cache on first use
// (matplotlib's Path._unit_rectangle, set while a figure is saved). It
// may not write anything else on behalf of a caller: a new name (pandas'
// accessor registration writes the caller's name), a callable or an
// object of a class the code built into the cache, a dunder, a cache
// already filled; nor may another package's code
// (standing for copy or dataclasses), nor the user's code.
func TestLibraryKeepsItsOwnClassCaches(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"orqlazy/__init__.py": "class Meta(type):\n    cache = None\nclass Shape:\n    _unit = None\n    _spare = None\n    spare = None\n    @classmethod\n    def unit(cls):\n        if cls._unit is None:\n            cls._unit = cls()\n        return cls._unit\n",
		"orqlazy/more.py":     "from orqlazy import Meta, Shape\ndef tag(name, value):\n    setattr(Shape, name, value)\ndef tag_meta(name, value):\n    setattr(Meta, name, value)\n",
		"orqother.py":         "import orqlazy\ndef tag(name, value):\n    setattr(orqlazy.Shape, name, value)\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	req := func(code string) runner.Request {
		return runner.Request{Code: code, AllowedImports: []string{"orqlazy", "orqlazy.more", "orqother"}, ExtraSysPath: []string{dir}}
	}
	hooks(t, func(t *testing.T, hook string) {
		resp, _, _ := run(t, req("import orqlazy\nu = orqlazy.Shape.unit()\nreturn [u is orqlazy.Shape.unit(), type(u).__name__]"))
		wantOutput(t, resp, `[true, "Shape"]`)
	})
	hooks(t, func(t *testing.T, hook string) {
		if hook == "python" {
			t.Skip("SKIP: the Python hook does not know which classes the code built; the C hook does")
		}
		for _, c := range []struct{ code, want string }{
			{"import orqother\norqother.tag('_spare', 1)\nreturn 'ESCAPED'", "the code did not create"},                                       // another package
			{"import orqlazy.more\norqlazy.more.tag('price', 1)\nreturn 'ESCAPED'", "the code did not create"},                                // a new name
			{"import orqlazy.more\norqlazy.more.tag('_spare', len)\nreturn 'ESCAPED'", "the code did not create"},                             // a callable
			{"import orqlazy.more\nV = type(int)('V', (), {})\norqlazy.more.tag('_spare', V())\nreturn 'ESCAPED'", "the code did not create"}, // of a class the code built
			{"import orqlazy.more\norqlazy.more.tag('__match_args__', ('x',))\nreturn 'ESCAPED'", "the code did not create"},
			// A metaclass's slots steer every class made with it (mro, ...):
			// not even an empty one is filled.
			{"import orqlazy.more\norqlazy.more.tag_meta('cache', 1)\nreturn 'ESCAPED'", "the code did not create"},
			{"import orqlazy, orqlazy.more\norqlazy.Shape.unit()\norqlazy.more.tag('_unit', 1)\nreturn 'ESCAPED'", "the code did not create"}, // filled already
			// The user's own writes: the guard of the code's writes refuses
			// them first.
			{"import orqlazy\norqlazy.Shape.spare = 1\nreturn 'ESCAPED'", "in the sandbox"},
			{"import orqlazy\nsetattr(orqlazy.Shape, 'spare', 1)\nreturn 'ESCAPED'", "in the sandbox"},
		} {
			resp, out, _ := run(t, req(c.code))
			wantNoEscape(t, resp, out)
			if resp.Success || !strings.Contains(resp.Error, c.want) {
				t.Fatalf("%q: want a refusal (%q), got success=%v %s: %s", c.code, c.want, resp.Success, resp.ErrorKind, resp.Error)
			}
		}
	})
}

package runner_test

import (
	"strings"
	"testing"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/runner"
)

// TestModuleSurfacesAreReviewed walks every reviewed module surface in the
// real interpreter: each name exists, and none is a module (other than a
// reviewed submodule), a mutable container of the interpreter's state
// (dispatch tables, registries, caches), or a callable that evaluates code,
// reads attributes by string or hands out namespaces — unless the import
// shim replaces it with a guarded version.
func TestModuleSurfacesAreReviewed(t *testing.T) {
	out := pyUnit(t, `
import importlib, json, types, collections, builtins
rules = json.loads(`+strconvQuote(string(rules.JSON()))+`)
surfaces = rules["module_surfaces"]
guards = ns["_orq_guards"](None)
dangerous = {eval, exec, compile, getattr, setattr, delattr, vars, globals, locals,
             builtins.__import__, open, dir, type.__subclasses__}
import typing, string, inspect
dangerous |= {typing.get_type_hints, typing.ForwardRef, string.Formatter}
immutable = (int, float, complex, str, bytes, bool, type(None), tuple, frozenset, range)
bad = []
for m in surfaces:
    importlib.import_module(m)
for m, names in surfaces.items():
    mod = importlib.import_module(m)
    for n in names:
        if not hasattr(mod, n):
            bad.append("%s.%s: no such name" % (m, n)); continue
        v = getattr(mod, n)
        if isinstance(v, types.ModuleType):
            if m + "." + n not in surfaces:
                bad.append("%s.%s: a module without a reviewed surface" % (m, n))
            continue
        if (m, n) in guards:
            continue
        try:
            if v in dangerous:
                bad.append("%s.%s: evaluates code or reads attributes by string" % (m, n)); continue
        except TypeError:
            pass
        if v is builtins or (isinstance(v, types.BuiltinFunctionType) and getattr(v, "__self__", None) is builtins and v.__name__ in ("eval", "exec", "compile", "getattr", "setattr", "vars", "globals", "__import__", "open")):
            bad.append("%s.%s: the real builtins" % (m, n)); continue
        if callable(v) or isinstance(v, immutable):
            continue
        import enum, decimal, re as _re, datetime, uuid
        if isinstance(v, (enum.Enum, datetime.tzinfo, uuid.UUID, typing.TypeVar)):
            continue
        # reviewed: read-only sequences of localised names
        if type(v).__module__ == "calendar" and type(v).__name__ in ("_localized_day", "_localized_month"):
            continue
        bad.append("%s.%s: %s is neither callable nor immutable (shared interpreter state?)" % (m, n, type(v).__name__))
print(json.dumps(bad))
`)
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("surfaces hand out what they must not:\n%s", out)
	}
}

// What an allowed module gives user code is its reviewed surface: the
// copy + collections escape starts from copy.dispatch_table (a user reducer
// there makes copy.copy call setattr on any object); it is not there. The
// views themselves are checked (user code reads no module's __dict__).
func TestModuleViewsAreSurfaces(t *testing.T) {
	out := viewNames(t, []string{"copy", "collections"}, "sorted(k for k in vars(v) if not k.startswith('_'))")
	if want := `{"copy": ["Error", "copy", "deepcopy", "error"], "collections": ["ChainMap", "Counter", "OrderedDict", "UserDict", "UserList", "UserString", "abc", "defaultdict", "deque", "namedtuple"]}`; out != want {
		t.Fatalf("got %s\nwant %s", out, want)
	}
	out = viewNames(t, []string{"copy", "json", "re", "typing", "collections.abc"},
		"[k in vars(v) for k in ('dispatch_table', 'decoder', 'codecs', 'copyreg', 'sys', 'ForwardRef')] + [v.__name__]")
	if want := `{"copy": [false, false, false, false, false, false, "copy"], "json": [false, false, false, false, false, false, "json"], "re": [false, false, false, false, false, false, "re"], "typing": [false, false, false, false, false, false, "typing"], "collections.abc": [false, false, false, false, false, false, "collections.abc"]}`; out != want {
		t.Fatalf("got %s\nwant %s", out, want)
	}
	// with the static rules out of the way, a module view's namespace is
	// not readable by user code
	rules := weakRules(t, []string{"__dict__"}, nil, nil)
	resp, _, _ := run(t, runner.Request{Code: "import copy\nm = copy\nreturn sorted(m.__dict__)", AllowedImports: []string{"copy"}, Rules: rules, Classes: true})
	if resp.Success || !strings.Contains(resp.Error, "readable only of") {
		t.Fatalf("a module view's __dict__: success=%v %s %s", resp.Success, resp.Output, resp.Error)
	}
}

// operator.attrgetter and methodcaller turn strings into attribute reads:
// the views hand out guarded versions that take plain names only.
func TestGuardedOperatorHelpers(t *testing.T) {
	rules := weakRules(t, nil, []string{"attrgetter", "methodcaller"}, nil)
	for _, c := range []struct{ code, want string }{
		{"import operator\nD = '_' * 2\ntry:\n    operator.attrgetter(D + 'globals' + D)(len)\nexcept TypeError:\n    return 'refused'\nreturn 'escaped'", `"refused"`},
		{"import operator\ntry:\n    operator.attrgetter('real', ''.join(['x.', '_y']))\nexcept TypeError:\n    return 'refused'\nreturn 'escaped'", `"refused"`},
		{"import operator\ntry:\n    operator.methodcaller(''.join(['_', '_reduce_ex__']), 2)\nexcept TypeError:\n    return 'refused'\nreturn 'escaped'", `"refused"`},
		// benign neighbours
		{"import operator\nrows = [{'age': 3}, {'age': 1}]\nclass_ = None\nreturn [operator.attrgetter('real')(3), operator.methodcaller('upper')('a'), sorted(rows, key=operator.itemgetter('age'))[0]['age']]", `[3, "A", 1]`},
	} {
		resp, _, _ := run(t, runner.Request{Code: c.code, AllowedImports: []string{"operator"}, Rules: rules})
		wantOutput(t, resp, c.want)
	}
}

// A reviewed module's submodules are importable only when they are reviewed
// too: `from json.decoder import ...` would otherwise hand out a module the
// surface left out.
func TestUnreviewedSubmoduleRefused(t *testing.T) {
	rules := weakRules(t, nil, nil, nil)
	resp, _, _ := run(t, runner.Request{Code: "from json.decoder import JSONArray\nreturn 1", AllowedImports: []string{"json"}, Rules: rules})
	if resp.Success || !strings.Contains(resp.Error, "reviewed parts") {
		t.Fatalf("from json.decoder import: success=%v %s", resp.Success, resp.Error)
	}
	resp, _, _ = run(t, runner.Request{Code: "from collections.abc import Mapping\nimport collections.abc\nreturn [Mapping.__name__, collections.abc.Sequence.__name__]", AllowedImports: []string{"collections"}, Rules: rules})
	wantOutput(t, resp, `["Mapping", "Sequence"]`)
}

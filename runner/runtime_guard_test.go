package runner_test

// The run-time half on its own: these tests weaken the in-child checker's
// table (the Go validator is not in this path) so that attack code reaches
// the runner, and assert that the module views, the guarded helpers, the
// C-import path of the shim and the audit hook stop the attack's goal.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/validator"
)

// weakRules returns the rules table with the given dunders allowed, the
// given names removed from forbidden_attributes and forbidden_names, and
// extra names added to safe_builtins.
func weakRules(t *testing.T, dunders, unforbid, builtins []string) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(validator.RulesJSON(), &m); err != nil {
		t.Fatal(err)
	}
	d := m["dunder"].(map[string]any)
	allow := d["allow"].([]any)
	for _, x := range dunders {
		allow = append(allow, x)
	}
	d["allow"] = allow
	fa := m["forbidden_attributes"].(map[string]any)
	fn := m["forbidden_names"].(map[string]any)
	for _, x := range unforbid {
		delete(fa, x)
		delete(fn, x)
	}
	sb := m["safe_builtins"].([]any)
	for _, x := range builtins {
		sb = append(sb, x)
	}
	m["safe_builtins"] = sb
	b, _ := json.Marshal(m)
	return b
}

func TestAuditHookStopsFramesWithoutStaticRules(t *testing.T) {
	rules := weakRules(t, []string{"__traceback__"}, []string{"tb_frame", "gi_frame", "f_globals"}, nil)
	for _, code := range []string{
		"try:\n    1 / 0\nexcept Exception as e:\n    return str(e.__traceback__.tb_frame.f_globals)",
		"def g():\n    yield 1\nreturn str(g().gi_frame.f_globals)",
	} {
		resp, _, _ := run(t, runner.Request{Code: code, Rules: rules})
		if resp.Success || !strings.Contains(resp.Error, "sandbox: introspection") {
			t.Fatalf("%q: want the audit hook to refuse, got success=%v %s: %s", code, resp.Success, resp.ErrorKind, resp.Error)
		}
	}
}

func TestAuditHookStopsOpenWithoutStaticRules(t *testing.T) {
	secret := "CANARY-runtime-open"
	f := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(f, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	rules := weakRules(t, nil, []string{"open"}, []string{"open"})
	resp, _, _ := run(t, runner.Request{Code: "return open(" + strconvQuote(f) + ").read()", Rules: rules})
	if resp.Success || strings.Contains(string(resp.Output)+resp.Error, secret) || !strings.Contains(resp.Error, "is not allowed") {
		t.Fatalf("open not refused: success=%v output=%s error=%s", resp.Success, resp.Output, resp.Error)
	}
	// Benign neighbour: a C-level import still reads the stdlib.
	resp, _, _ = run(t, runner.Request{Code: "import datetime\nreturn str(datetime.datetime.strptime('2020-02-03', '%Y-%m-%d').date())",
		AllowedImports: []string{"datetime"}, Rules: rules})
	wantOutput(t, resp, `"2020-02-03"`)
}

// The views' own namespaces show what user code can get from an allowed
// module (read here by the runner's own code: user code reads no module's
// __dict__, whatever the static rules say).
func TestModuleViewsDropForbiddenNames(t *testing.T) {
	out := viewNames(t, []string{"operator", "string", "typing", "enum", "re"},
		"sorted(k for k in vars(v) if k in ('attrgetter', 'methodcaller', 'itemgetter', 'Formatter', 'Template', 'get_type_hints', 'ForwardRef', 'NamedTupleMeta', 'global_enum', 'EnumType', 'Enum', 'sys', 'enum', 'functools', '_compiler'))")
	if want := `{"operator": ["attrgetter", "itemgetter", "methodcaller"], "string": ["Formatter", "Template"], "typing": ["get_type_hints"], "enum": ["Enum"], "re": []}`; out != want {
		t.Fatalf("got %s\nwant %s", out, want)
	}
	// string.Formatter and typing.get_type_hints are the guarded ones
	out = viewNames(t, []string{"string", "typing"}, "[getattr(v, n).__module__ for n in ('Formatter', 'get_type_hints') if hasattr(v, n)] + [getattr(v, 'Formatter', None) is not __import__('string').Formatter, getattr(v, 'get_type_hints', None) is not __import__('typing').get_type_hints]")
	if want := `{"string": ["string", true, true], "typing": ["typing", true, true]}`; out != want {
		t.Fatalf("got %s\nwant %s", out, want)
	}
}

// viewNames builds the module views of mods as the import shim hands them
// to user code (under the shipped rules) and returns, as JSON by module
// name, expr evaluated with v bound to each view. As in an execution, the
// modules are imported first (collections.abc with them, as typing does).
func viewNames(t *testing.T, mods []string, expr string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(path, validator.RulesJSON(), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(mods)
	return runDriver(t, "\nimport json as _j\nR = _j.loads(open("+strconvQuote(path)+").read())\n"+
		"for n in "+string(m)+":\n    __import__(n)\nimport collections.abc\n"+
		"shim = _orq_make_import([n.split('.')[0] for n in "+string(m)+"], R, {})[0]\nd = {}\n"+
		"for n in "+string(m)+":\n    v = shim(n.split('.')[0], None, None, None, 0)\n    for part in n.split('.')[1:]:\n        v = getattr(v, part)\n"+
		"    d[n] = "+expr+"\nprint(_j.dumps(d))\n")
}

func TestGuardedFunctoolsHelpers(t *testing.T) {
	cases := []struct{ code, want string }{
		// the escapes: refused at run time even though the code passes the checker
		{"import functools, json\ndef g():\n    pass\nD = '_' * 2\ntry:\n    functools.update_wrapper(g, json.loads, (), [D + 'globals' + D])\nexcept TypeError as e:\n    return 'refused'\nreturn 'escaped'", `"refused"`},
		{"import functools, json\ndef e():\n    'x'\ntry:\n    functools.update_wrapper(json.loads, e)\nexcept TypeError:\n    return json.loads.__doc__ != 'x'\nreturn False", `true`},
		{"import functools\ns = 'print'\n@functools.singledispatch\ndef d(x):\n    return 0\ndef h(x: s):\n    return 1\ntry:\n    d.register(h)\nexcept TypeError:\n    return 'refused'\nreturn 'evaluated'", `"refused"`},
		// benign neighbours
		{"import functools\ndef deco(f):\n    @functools.wraps(f)\n    def w(*a):\n        return f(*a)\n    return w\n@deco\ndef add(a, b):\n    return a + b\nreturn [add(1, 2), add.__name__]", `[3, "add"]`},
		{"import functools\n@functools.singledispatch\ndef d(x):\n    return 'obj'\n@d.register\ndef _(x: int):\n    return 'int'\nreturn [d(1), d('a')]", `["int", "obj"]`},
	}
	for _, c := range cases {
		resp, _, _ := run(t, runner.Request{Code: c.code, AllowedImports: []string{"functools", "json"}})
		wantOutput(t, resp, c.want)
	}
}

func TestCImportsDoNotWidenUserImports(t *testing.T) {
	// datetime's C code imports _strptime and time through the frame's
	// __import__; that works with only datetime allowed, and hands the user
	// nothing: the user's own `import time` is still refused.
	resp, _, _ := run(t, runner.Request{Code: "import datetime\nd = datetime.datetime.strptime('2021', '%Y')\nreturn d.strftime('%Y')", AllowedImports: []string{"datetime"}})
	wantOutput(t, resp, `"2021"`)
	resp, _, _ = run(t, runner.Request{Code: "import datetime\ndatetime.datetime.strptime('2021', '%Y')\nimport time\nreturn 1", AllowedImports: []string{"datetime"}})
	if resp.Success {
		t.Fatal("import time succeeded with only datetime allowed")
	}
	out := pyUnit(t, `
shim, real, allowed = ns['_orq_make_import'](['re'])
print(shim('time', {}, {}, [], 0))
try:
    shim('time', {}, {}, None, 0)
    print('handed out')
except ImportError:
    print('denied')
`)
	if out != "None\ndenied\n" {
		t.Fatalf("got %q", out)
	}
}

// TestGuardedAttributeNamesWithoutStaticRules: getattr/hasattr and
// operator.attrgetter/methodcaller with a name computed at run time (the
// static rules see no literal) reach no attribute the static rules forbid:
// the runner's guarded versions refuse dunders, frame, code and private
// attributes, and pass public names.
func TestGuardedAttributeNamesWithoutStaticRules(t *testing.T) {
	rules := weakRules(t, nil, []string{"getattr", "hasattr"}, nil)
	gen := "def g():\n    yield 1\n"
	for _, c := range []struct{ code, want string }{
		{gen + "return str(getattr(g(), ''.join(['gi', '_frame'])))", "getattr: 'gi_frame'"},
		{gen + "return hasattr(g(), ''.join(['gi', '_code']))", "hasattr: 'gi_code'"},
		{"return str(getattr(len, ''.join(['__', 'self', '__'])))", "getattr: '__self__'"},
		{"import random\nreturn str(getattr(random, ''.join(['_', 'os'])))", "getattr: '_os'"},
		{gen + "import operator\nreturn str(operator.attrgetter(''.join(['gi_frame', '.f_back']))(g()))", "operator.attrgetter"},
		{"import operator\nreturn str(operator.methodcaller(''.join(['__reduce', '_ex__']), 2)(len))", "operator.methodcaller"},
		{"import operator\nreturn operator.methodcaller(''.join(['for', 'mat']), len)('{0.__self__}')", "operator.methodcaller"},
		{"return getattr(args['t'], ''.join(['for', 'mat']))(len)", "getattr: 'format'"},
	} {
		resp, _, _ := run(t, runner.Request{Code: c.code, Rules: rules, AllowedImports: []string{"operator", "random"}, Args: json.RawMessage(`{"t": "{0.__self__}"}`)})
		if resp.Success || !strings.Contains(resp.Error, c.want) {
			t.Errorf("%q: want a refusal naming %q, got success=%v %s: %s", c.code, c.want, resp.Success, resp.ErrorKind, resp.Error)
		}
	}
	for _, c := range []struct{ code, want string }{
		{"n = ''.join(['up', 'per'])\nreturn getattr('a', n)()", `"A"`},
		{"return getattr(len, ''.join(['__', 'name', '__']))", `"len"`},
		{"return [getattr(args, 'nope', 7), hasattr(args, ''.join(['ke', 'ys']))]", `[7,true]`},
		{"import operator\nreturn operator.attrgetter(''.join(['real']))(3)", `3`},
		{"e = ValueError('x')\nreturn [type(e).__name__, isinstance(int, type)]", `["ValueError",true]`},
	} {
		resp, _, _ := run(t, runner.Request{Code: c.code, Rules: rules, AllowedImports: []string{"operator"}})
		wantOutput(t, resp, c.want)
	}
}

// TestGuardRewritesEveryPosition: the run-time guards reach attribute
// writes, private reads and non-literal .format reads wherever they stand
// (nested in each other, in lists of targets, under another attribute),
// and leave the rest of the tree alone. The rewrite is checked on the
// source it produces, so a position the walk misses shows as an unguarded
// read or write.
func TestGuardRewritesEveryPosition(t *testing.T) {
	cases := []struct{ code, want string }{
		{"o.a = 1", "_orq_w(o).a = 1"},
		{"del o.a, p._b", "del _orq_w(o).a, _orq_w(p)._b"},
		{"for o.a in xs: pass", "for _orq_w(o).a in xs:\n    pass"},
		{"x = o._p", "x = _orq_own(o, '_p')._p"},
		{"x = o._p._q", "x = _orq_own(_orq_own(o, '_p')._p, '_q')._q"},
		{"x = t.format(1)", "x = _orq_fmt(t, 'format')(1)"},
		{"x = t.format.y", "x = _orq_fmt(t, 'format').y"},
		{"x = [t.format_map, u.format]", "x = [_orq_fmt(t, 'format_map'), _orq_fmt(u, 'format')]"},
		{"t.format.y = 1", "_orq_w(_orq_fmt(t, 'format')).y = 1"},
		{"f(o.format)[o._x.format] = 2", "f(_orq_fmt(o, 'format'))[_orq_fmt(_orq_own(o, '_x')._x, 'format')] = 2"},
		{"x = '{}'.format(1) + o.__doc__ + o._asdict()", "x = '{}'.format(1) + o.__doc__ + o._asdict()"},
		{"x = [o.a for o.b in ys if o._c]", "x = [o.a for _orq_w(o).b in ys if _orq_own(o, '_c')._c]"},
	}
	var b strings.Builder
	b.WriteString("import ast, json\nout = []\n")
	for _, c := range cases {
		code, _ := json.Marshal(c.code)
		fmt.Fprintf(&b, "tree = ast.parse(%s)\nns['_orq_guard_writes'](tree, ['_asdict'])\nout.append(ast.unparse(tree))\n", code)
	}
	b.WriteString("print(json.dumps(out))\n")
	var got []string
	if err := json.Unmarshal([]byte(pyUnit(t, b.String())), &got); err != nil || len(got) != len(cases) {
		t.Fatalf("%v: %q", err, got)
	}
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("%q:\n got  %s\n want %s", c.code, got[i], c.want)
		}
	}
}

package subprocess

// Red-team corpus run end to end through the real tier-1 backend (Go
// validator, then the Python child: in-child checker, module views and
// guards, audit hook, sealing). Each case asserts that the attack's GOAL is
// not reached — a canary file stays unread, no command runs, no forbidden
// object (module, frame, builtins) reaches the output, the runner's json is
// not poisoned — not merely that validation failed. docs/validator.md lists
// the techniques.

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// redteamAllow is an allowlist an operator might plausibly grant.
var redteamAllow = []string{"re", "math", "json", "collections", "itertools", "datetime",
	"string", "functools", "operator", "random", "statistics", "decimal", "fractions",
	"heapq", "bisect", "typing", "enum", "abc", "numbers", "copy", "textwrap", "time"}

// D builds a dunder at run time, out of the static checker's sight.
const rtD = "D = '_' * 2\n"

type redteamCase struct {
	name  string
	code  string   // {CANARY} is replaced by the canary file's path
	allow []string // nil = redteamAllow
	// forbidden substrings of the whole result (output, stdout, stderr,
	// error) besides the canary secret and "uid=".
	leaks []string
}

var redteamCases = []redteamCase{
	{name: "update_wrapper updated=__globals__ pulls json's globals (codecs)",
		code: rtD + "import functools, json\ndef g():\n    pass\nfunctools.update_wrapper(g, json.loads, assigned=(), updated=[D + 'globals' + D])\nglobal codecs\nreturn codecs.open('{CANARY}').read()"},
	{name: "update_wrapper updated=__dict__ copies operator.attrgetter",
		code:  rtD + "import functools, operator\ndef g():\n    pass\nfunctools.update_wrapper(g, operator, (), [D + 'dict' + D])\nglobal attrgetter\nreturn str(attrgetter(D + 'class' + D)(1))",
		leaks: []string{"<class 'int'>"}},
	{name: "wraps assigned=__globals__ onto a real function",
		code: rtD + "import functools, json\n@functools.wraps(json.loads, assigned=[D + 'globals' + D])\ndef h():\n    pass\nreturn str(h)"},
	{name: "update_wrapper writes metadata into the real json.loads",
		code:  "import functools, json\ndef evil():\n    'pwned'\nfunctools.update_wrapper(json.loads, evil)\nreturn json.loads.__doc__",
		leaks: []string{"pwned"}},
	{name: "singledispatch register evals a string annotation (subclasses -> popen)",
		code: rtD + "import functools\nglobal L\nL = []\ns = '[L.append([c for c in ().' + D + 'class' + D + '.' + D + 'base' + D + '.' + D + 'subclasses' + D + '() if c.' + D + 'name' + D + ' == \"_wrap_close\"][0].' + D + 'init' + D + '.' + D + 'globals' + D + '[\"popen\"](\"id\").read()), int][1]'\n@functools.singledispatch\ndef d(x):\n    return 0\ndef h(x: s):\n    return 1\nd.register(h)\nreturn L[0]"},
	{name: "singledispatch register evals a ForwardRef nested in typing.List",
		code:  rtD + "import functools, typing\nglobal L\nL = []\ns = '[L.append(().' + D + 'class' + D + '), int][1]'\n@functools.singledispatch\ndef d(x):\n    return 0\ndef h(x: typing.List[s]):\n    return 1\nd.register(h)\nreturn str(L)",
		leaks: []string{"<class 'tuple'>"}},
	{name: "enum.global_enum poisons the runner's json module",
		code:  "import enum, json\nE = enum.Enum('E', {'dumps': 1}, module='json')\nenum.global_enum(E)\nreturn 'POISONED'",
		leaks: []string{"POISONED"}},
	{name: "abc.ABCMeta builds a class with user dunders",
		code:  rtD + "import abc\nX = abc.ABCMeta('X', (), {D + 'str' + D: lambda s: 'CLASSMADE'})\nreturn str(X())",
		leaks: []string{"CLASSMADE"}},
	{name: "generator gi_frame.f_back.f_globals reaches the runner",
		code: "def g():\n    yield 1\nx = g()\nreturn str(x.gi_frame.f_back.f_globals)", leaks: []string{"_orq_"}},
	{name: "traceback tb_frame.f_builtins",
		code: "try:\n    1 / 0\nexcept Exception as e:\n    return str(e.__traceback__.tb_frame.f_builtins['open']('{CANARY}').read())"},
	{name: "except* group traceback",
		code: "try:\n    1 / 0\nexcept* ZeroDivisionError as eg:\n    return str(eg.__traceback__.tb_frame.f_globals)", leaks: []string{"_orq_"}},
	{name: "coroutine cr_frame", code: "async def f():\n    return 1\nc = f()\nreturn str(c.cr_frame.f_globals)", leaks: []string{"_orq_"}},
	{name: "string.Formatter().get_field traversal",
		code: "import string\nreturn str(string.Formatter().get_field('0.__class__.__base__', [1], {}))", leaks: []string{"<class 'object'>"}},
	{name: "str.format on a built template",
		code: rtD + "t = '{0.' + D + 'class' + D + '}'\nreturn t.format(1)", leaks: []string{"<class 'int'>"}},
	{name: "operator.attrgetter by name", code: "import operator\nreturn str(operator.attrgetter('__class__')(1))", leaks: []string{"<class 'int'>"}},
	{name: "random._os.system", code: "import random\nreturn random._os.popen('id').read()"},
	{name: "re.enum.sys.modules os", code: "import re\nreturn str(re.enum.sys.modules['o' + 's'].popen('id').read())"},
	{name: "json.codecs.open", code: "import json\nreturn json.codecs.open('{CANARY}').read()"},
	{name: "collections._sys", code: "import collections\nreturn str(collections._sys.modules)", leaks: []string{"module 'os'"}},
	{name: "bare refs to eval via a list", code: "fs = [print, eval]\nreturn fs[1](\"open('{CANARY}').read()\")"},
	{name: "NFKC eval", code: "return \uff45val(\"open('{CANARY}').read()\")"},
	{name: "NFKC attribute", code: "return str(().__\uff43lass__.__base__.__subclasses__())", leaks: []string{"_wrap_close"}},
	{name: "match class pattern reads __class__", code: "match 1:\n    case object(__class__=c):\n        return str(c)", leaks: []string{"<class 'int'>"}},
	{name: "lambda default captures open", code: "f = lambda o=open: o('{CANARY}').read()\nreturn f()"},
	{name: "decorator eval", code: "@eval\ndef f():\n    pass\nreturn 1"},
	{name: "print.__self__ is builtins", code: "return str(print.__self__.open('{CANARY}').read())"},
	{name: "dunder subscript with escapes", code: "d = {}\nreturn d['\\x5f_class__']"},
	{name: "bare CR hides an import", code: "x = 1\rimport os\rreturn os.popen('id').read()"},
	{name: "import os denied", code: "import os\nreturn os.popen('id').read()"},
	{name: "relative import", code: "from . import x\nreturn 1"},
	{name: "class statement", code: "class A:\n    def __str__(self):\n        return 'CLASSMADE'\nreturn str(A())", leaks: []string{"CLASSMADE"}},
	{name: "module attribute write", code: "import json\njson.dumps = len\nreturn 'POISONED'", leaks: []string{"POISONED"}},
	{name: "site builtins", code: "return str(license) + str(help) + str(credits)", leaks: []string{"Python Software Foundation"}},
	{name: "super / type / object subclasses",
		code: "return str(object.__subclasses__())", leaks: []string{"_wrap_close"}},
	{name: "memoryview", code: "return memoryview(b'x').tolist()", leaks: []string{"[120]"}},
}

func TestRedTeam(t *testing.T) {
	b := newTestBackend(t)
	dir := t.TempDir()
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		t.Fatal(err)
	}
	secret := "CANARY-" + hex.EncodeToString(buf)
	canary := filepath.Join(dir, "canary.txt")
	if err := os.WriteFile(canary, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range redteamCases {
		tc := tc
		t.Run(tc.name, func(t *testing.T) {
			allow := tc.allow
			if allow == nil {
				allow = redteamAllow
			}
			code := strings.ReplaceAll(tc.code, "{CANARY}", canary)
			res := execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: allow})
			all := string(res.Output) + "\n" + res.Stdout + "\n" + res.Stderr + "\n" + res.Error
			for _, bad := range append([]string{secret, "uid="}, tc.leaks...) {
				if strings.Contains(all, bad) {
					t.Fatalf("attack reached its goal (%q in the result): success=%v kind=%s\n%s", bad, res.Success, res.ErrorKind, all)
				}
			}
			if res.Success {
				t.Fatalf("attack ran to completion: output %s", res.Output)
			}
			t.Logf("stopped: %s: %s", res.ErrorKind, firstLine(res.Error))
		})
	}
}

// TestRedTeamBenignNeighbours: the code next to each attack still works.
func TestRedTeamBenignNeighbours(t *testing.T) {
	b := newTestBackend(t)
	cases := []struct{ name, code, want string }{
		{"functools.wraps decorator", "import functools\ndef logged(fn):\n    @functools.wraps(fn)\n    def inner(*a):\n        return fn(*a)\n    return inner\n@logged\ndef add(a, b):\n    'Add.'\n    return a + b\nreturn [add(1, 2), add.__name__, add.__doc__]", `[3, "add", "Add."]`},
		{"update_wrapper with defaults", "import functools\ndef a():\n    'doc a'\ndef b():\n    pass\nfunctools.update_wrapper(b, a)\nreturn b.__doc__", `"doc a"`},
		{"singledispatch by annotation and by class", "from functools import singledispatch\n@singledispatch\ndef show(x):\n    return 'obj'\n@show.register\ndef _(x: int):\n    return 'int'\n@show.register\ndef _(x: list | tuple):\n    return 'seq'\n@show.register(str)\ndef _(x):\n    return 'str'\nreturn [show(1), show('a'), show([1]), show(1.5)]", `["int", "str", "seq", "obj"]`},
		{"datetime strptime/strftime (C code imports _strptime and time)", "import datetime\nd = datetime.datetime.strptime('2024-05-01 10:30', '%Y-%m-%d %H:%M')\nreturn [d.strftime('%d/%m/%Y %H:%M'), d.isoformat()]", `["01/05/2024 10:30", "2024-05-01T10:30:00"]`},
		{"enum functional API", "import enum\nColor = enum.Enum('Color', 'RED GREEN')\nreturn [c.name for c in Color] + [Color(1).name]", `["RED", "GREEN", "RED"]`},
		{"collections.abc checks", "from collections.abc import Mapping, Sequence\nreturn [isinstance({}, Mapping), isinstance([], Sequence)]", `[true, true]`},
		{"namedtuple and typing.NamedTuple", "import collections, typing\nP = collections.namedtuple('P', 'x y')\nQ = typing.NamedTuple('Q', [('a', int)])\nreturn [P(1, 2)._asdict(), Q(3).a]", `[{"x": 1, "y": 2}, 3]`},
		{"operator itemgetter, string.Template", "import operator, string\nrows = [(2, 'b'), (1, 'a')]\nreturn [sorted(rows, key=operator.itemgetter(0)), string.Template('$x!').substitute(x='hi')]", `[[[1, "a"], [2, "b"]], "hi!"]`},
		{"generators and exceptions", "def g():\n    yield 1\n    yield 2\ntry:\n    1 / 0\nexcept ZeroDivisionError as e:\n    msg = str(e)\nreturn [list(g()), msg]", `[[1, 2], "division by zero"]`},
		{"copy, decimal, fractions, statistics", "import copy, decimal, fractions, statistics\nreturn [copy.deepcopy({'a': [1]}), str(decimal.Decimal('1.10') + 1), str(fractions.Fraction(1, 3)), statistics.mean([1, 2, 3])]", `[{"a": [1]}, "2.10", "1/3", 2]`},
		{"typing hints", "from typing import Optional, List\ndef f(xs: List[int], k: Optional[int] = None) -> int:\n    return sum(xs) + (k or 0)\nreturn f([1, 2], 3)", `6`},
		{"re and json", "import re, json\nreturn json.loads(json.dumps({'n': re.findall(r'\\d+', 'a1b22')}))", `{"n": ["1", "22"]}`},
	}
	for _, c := range cases {
		c := c
		t.Run(c.name, func(t *testing.T) {
			res := execute(t, b, shared.ExecuteRequest{Code: c.code, AllowedImports: redteamAllow})
			wantSuccess(t, res, c.want)
		})
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

package validator

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The in-child checker runs under Debian's CPython (never a pyenv shim).
const systemPython = "/usr/bin/python3"

const pyDriver = `
import json, sys
req = json.load(sys.stdin)
ns = {}
exec(compile(req["checker"], "checker.py", "exec"), ns)
out = []
for c in req["cases"]:
    out.append(ns["_orq_check"](c["code"], c["allow"], req["rules"], c["classes"]))
json.dump(out, sys.stdout)
`

type pyFinding struct {
	Rule    string `json:"rule"`
	Message string `json:"message"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Snippet string `json:"snippet"`
}

func checkerSource(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "rules", "checker.py"))
	if err != nil {
		t.Fatalf("read checker.py: %v", err)
	}
	return string(b)
}

// runPython runs the in-child checker over cases in one python3 process.
func runPython(t testing.TB, cases []tcase) [][]pyFinding {
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("%s not available", systemPython)
	}
	type pc struct {
		Code    string   `json:"code"`
		Allow   []string `json:"allow"`
		Classes bool     `json:"classes"`
	}
	req := struct {
		Checker string          `json:"checker"`
		Rules   json.RawMessage `json:"rules"`
		Cases   []pc            `json:"cases"`
	}{Checker: checkerSource(t), Rules: RulesJSON()}
	for _, c := range cases {
		allow := c.allow
		if allow == nil {
			allow = []string{}
		}
		req.Cases = append(req.Cases, pc{c.code, allow, c.features().Classes})
	}
	in, _ := json.Marshal(req)
	cmd := exec.Command(systemPython, "-I", "-S", "-c", pyDriver)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python checker failed: %v\n%s", err, stderr.String())
	}
	var res [][]pyFinding
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decode python output: %v\n%s", err, out)
	}
	return res
}

// goStricter lists the corpus cases that the Go checker rejects and the
// CPython checker accepts, on purpose. Everything else must agree on the
// verdict.
var goStricter = map[string]string{
	"too deep":          "max_depth counts tree-sitter nodes; CPython's AST drops parentheses",
	"fstring hash 3.11": "any '#' in an f-string expression is rejected, even inside a nested string literal",
}

// extraDiff holds inputs that probe where tree-sitter and CPython disagree
// about what parses; only the direction "Python rejects => Go rejects" is
// asserted for them.
var extraDiff = []tcase{
	{"default before non-default", "", "def f(a=1, b):\n    pass\n", nil},
	{"aug assign tuple", "", "a, b += 1\n", nil},
	{"assign to call", "", "f() = 3\n", nil},
	{"empty if body", "", "if x:\nreturn 1\n", nil},
	{"comment only body", "", "if x:\n    # nothing\nreturn 1\n", nil},
	{"bare CR", "", "x = 1\ry = 2\rreturn x + y", nil},
	{"form feed indent", "", "if 1:\n\f    return 1\n", nil},
	{"tabs and spaces", "", "if 1:\n\treturn 1\n        return 2\n", nil},
	{"unterminated string", "", "x = 'abc\n", nil},
	{"unterminated triple", "", "x = '''abc\n", nil},
	{"lambda star", "", "f = lambda *: 1\n", nil},
	{"print chevron", "", "print >>x, 1\n", nil},
	{"backtick", "", "x = `1`\n", nil},
	{"ellipsis ok", "", "x = ...\nreturn x is Ellipsis", nil},
	{"keyword as name", "", "None = 1\n", nil},
	{"yield outside", "", "yield 1\n", nil},
	{"nonlocal top", "", "nonlocal x\n", nil},
	{"await top", "", "await x\n", nil},
	{"starred assign", "", "*a = [1]\n", nil},
	{"del literal", "", "del 1\n", nil},
	{"dict unpack in list", "", "x = [**a]\n", nil},
	{"kwargs before args", "", "f(**k, *a)\n", nil},
	{"positional after kw", "", "f(a=1, 2)\n", nil},
	{"decorator expr", "", "@x[0].y\ndef f():\n    pass\n", nil},
	{"fstring nested quotes ok", "", "return f\"{'a'}\"", nil},
	{"fstring triple nested", "", "return f'''{\"x\"} {'y'}'''", nil},
	{"fstring newline in triple", "", "return f'''{\n1}'''", nil},
	{"fstring newline single", "", "return f'{\n1}'", nil},
	{"string prefix combos", "", "return [rb'x', Rb'x', BR'x', u'x', F'x', fR'x', Rf'{1}']", nil},
	{"invalid prefix", "", "return ub'x'", nil},
	{"N escape bad name", "", "return '\\N{NOT A REAL NAME}'", nil},
	{"N escape ok", "", "return '\\N{BULLET}'", nil},
	{"octal big", "", "return '\\777'", nil},
	{"hex short U", "", "return '\\U0000'", nil},
	{"numeric literals", "", "return [0x_1, 1_000, 0o17, 0b1, 1e5, 1j, 1_0.0_1]", nil},
	{"bad numeric", "", "return 1__0", nil},
	{"leading zero", "", "return 012", nil},
	{"walrus in comprehension iterable", "", "return [x for x in (y := [1])]", nil},
	{"match soft keyword name", "", "match = 1\ncase = 2\n_ = 3\nreturn match + case", nil},
	{"type soft keyword call", "", "return type", nil},
	{"global after use", "", "x = 1\nglobal x\n", nil},
	{"return with semicolons", "", "x = 1; y = 2; return x", nil},
	{"with parenthesized", "", "with (a as b, c as d):\n    pass\n", nil},
	{"except star mix", "", "try:\n    pass\nexcept* A:\n    pass\nexcept B:\n    pass\n", nil},
	{"slice assignment", "", "x = [1]\nx[0:1] = [2]\nreturn x", nil},
	{"unicode escape name", "", "return '\\N{LATIN SMALL LETTER A}'", nil},
	{"vertical tab between tokens", "", "x = 1\x0b+ 2\nreturn x", nil},
	{"vertical tab as indent", "", "if 1:\n\x0b    return 1\n", nil},
	{"leading BOM", "", "\ufeffreturn 1", nil},
	{"BOM between tokens", "", "x = \ufeff1\nreturn x", nil},
	{"no-break space", "", "x =\u00a01\nreturn x", nil},
	{"zero-width space", "", "x\u200b = 1\nreturn 1", nil},
	{"line separator", "", "x = 1\u2028return x", nil},
	{"DEL", "", "x = 1\x7f\nreturn x", nil},
	{"vertical tab in string ok", "", "return 'a\x0bb'", nil},
	{"vertical tab in comment ok", "", "# a\x0bb\nreturn 1", nil},
	{"no-break space in string ok", "", "return 'a\u00a0b' + '\ufeff'", nil},
	{"zero-width space in comment ok", "", "return 1  # a\u200bb", nil},
	{"subscript N upper", "", "return d['\\N{LOW LINE}\\N{LOW LINE}class\\N{LOW LINE}\\N{LOW LINE}']", nil},
	{"bytes N not escape", "", "return d[b'\\N{LOW LINE}_class__']", nil},
	{"format with conversion", "", "return '{0!r:>10}'.format(1)", nil},
	{"format bad brace", "", "return '{'.format(1)", nil},
	{"format lone close", "", "return '}'.format(1)", nil},
	{"import dotted allowed", "", "import collections.abc\nreturn 1", stdAllow},
	{"from dotted allowed", "", "from collections.abc import Mapping\nreturn 1", stdAllow},
	{"fullwidth attr", "", "import math\nreturn math.\uff50i", stdAllow},
	{"nfkc private", "", "return x.\uff3fy", nil},
	{"ligature name", "", "\ufb01le = 1\nreturn \ufb01le", nil},
	{"annotation only", "", "x: int\nreturn 1", nil},
	{"class pattern private kw", "", "match x:\n    case C(_y=1):\n        pass\n", nil},
	{"mapping rest dunder", "", "match x:\n    case {**__rest__}:\n        pass\n", nil},
	{"star pattern dunder", "", "match x:\n    case [*__r__]:\n        pass\n", nil},
	{"as pattern dunder", "", "match x:\n    case 1 as __v__:\n        pass\n", nil},
}

func TestDifferential(t *testing.T) {
	var all []tcase
	all = append(all, attacks...)
	all = append(all, benign...)
	all = append(all, extraDiff...)
	py := runPython(t, all)
	if len(py) != len(all) {
		t.Fatalf("python returned %d results for %d cases", len(py), len(all))
	}
	v := New()
	agree, stricter := 0, 0
	for i, c := range all {
		g := v.CheckWith(context.Background(), c.code, c.allow, c.features())
		p := py[i]
		switch {
		case len(p) > 0 && len(g) == 0:
			t.Errorf("%s: CPython checker rejects (%v) but Go accepts\ncode:\n%s", c.name, p, c.code)
		case len(p) == 0 && len(g) > 0:
			stricter++
			if i < len(attacks)+len(benign) && goStricter[c.name] == "" {
				t.Errorf("%s: Go rejects (%v) but CPython checker accepts; add to goStricter if intended", c.name, rulesOf(g))
			}
		default:
			agree++
		}
		// For corpus attacks both checkers should name the same rule.
		if i < len(attacks) && len(p) > 0 {
			found := false
			for _, f := range p {
				if f.Rule == c.rule {
					found = true
				}
			}
			if !found && !strings.HasPrefix(c.rule, "parse") && c.rule != "nesting-too-deep" {
				t.Logf("%s: CPython checker names %v, Go %s", c.name, p, c.rule)
			}
		}
	}
	t.Logf("differential: %d cases, %d same verdict, %d Go stricter", len(all), agree, stricter)
}

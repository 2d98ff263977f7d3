package validator

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

func rulesOf(fs []shared.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out
}

func hasRule(fs []shared.Finding, rule string) bool {
	for _, f := range fs {
		if f.Rule == rule {
			return true
		}
	}
	return false
}

func TestAttacksRejected(t *testing.T) {
	v := New()
	for _, tc := range attacks {
		t.Run(tc.name, func(t *testing.T) {
			fs := v.CheckWith(context.Background(), tc.code, tc.allow, tc.features())
			if !hasRule(fs, tc.rule) {
				t.Errorf("want rule %s, got %v\ncode:\n%s", tc.rule, fs, tc.code)
			}
			for _, f := range fs {
				if f.Line < 1 || f.Column < 1 || f.Message == "" {
					t.Errorf("bad finding position/message: %+v", f)
				}
				if _, _, ok := RuleDescription(f.Rule); !ok {
					t.Errorf("finding with undescribed rule %q", f.Rule)
				}
			}
		})
	}
}

func TestBenignAccepted(t *testing.T) {
	v := New()
	for _, tc := range benign {
		t.Run(tc.name, func(t *testing.T) {
			if fs := v.CheckWith(context.Background(), tc.code, tc.allow, tc.features()); len(fs) != 0 {
				t.Errorf("benign code rejected: %v\ncode:\n%s", fs, tc.code)
			}
		})
	}
}

// neighbours names, for every rule, benign cases that sit right next to what
// the rule stops (same shape, harmless content).
var neighbours = map[string][]string{
	"positional-class-pattern": {"positional patterns on builtin types", "match"},
	"parse-error":              {"crlf source", "except star", "nested fstrings", "line continuation"},
	"code-too-large":           {"collections"},
	"nesting-too-deep":         {"comprehensions"},
	"validation-timeout":       {"itertools"},
	"forbidden-builtin":        {"keyword type arg", "re.compile attr", "print"},
	"reflection-builtin":       {"keyword type arg", "json schema keys", "isinstance checks"},
	"dunder-name":              {"dunder allowlist", "underscore vars"},
	"dunder-attribute":         {"dunder allowlist", "attribute reads"},
	"dunder-subscript":         {"private key strings", "json schema keys", "subscript writes"},
	"forbidden-string":         {"docstring mentions", "private key strings", "escapes in strings"},
	"private-attribute":        {"collections", "dataclass-free record", "underscore vars"},
	"reserved-name":            {"underscore vars", "object sentinel"},
	"introspection-attribute":  {"generators", "try except"},
	"code-object-attribute":    {"private key strings"},
	"module-attribute":         {"datetime", "re.compile attr", "string module"},
	"reflection-attribute":     {"operator itemgetter", "string module"},
	"unsafe-helper":            {"enum functional api", "abc collections checks", "singledispatch by annotation"},
	"format-string":            {"str format literal", "nested fstrings", "format builtin", "percent format"},
	"import-not-allowed":       {"re findall", "conditional imports", "datetime module"},
	"relative-import":          {"collections"},
	"star-import":              {"collections"},
	"not-in-surface":           {"io in-memory streams", "import urllib then urllib.parse"},
	"class-definition":         {"dataclass-free record", "nested functions closures"},
	"attribute-write":          {"subscript writes", "attribute reads", "function attribute"},
	"class-keyword":            {"class: dataclass records", "class: custom exception"},
}

func TestEveryRuleHasAttacksAndNeighbours(t *testing.T) {
	byName := map[string]bool{}
	for _, b := range benign {
		byName[b.name] = true
	}
	attacked := map[string]int{}
	for _, a := range attacks {
		attacked[a.rule]++
	}
	// Rules exercised by dedicated tests below rather than the corpus.
	attacked[RuleCodeTooLarge]++
	attacked[RuleValidationTimeout]++
	for _, id := range RuleIDs() {
		if attacked[id] == 0 {
			t.Errorf("rule %s has no attack in the corpus", id)
		}
		ns := neighbours[id]
		if len(ns) == 0 {
			t.Errorf("rule %s has no benign neighbour", id)
		}
		for _, n := range ns {
			if !byName[n] {
				t.Errorf("rule %s: neighbour %q is not a benign case", id, n)
			}
		}
	}
}

func TestCodeTooLarge(t *testing.T) {
	v := New(WithMaxCodeBytes(100))
	fs := v.Check(context.Background(), "x = 1\n"+strings.Repeat("# pad\n", 50), nil)
	if !hasRule(fs, RuleCodeTooLarge) {
		t.Fatalf("want code-too-large, got %v", fs)
	}
	// The default limit accepts a 50 KB body.
	if fs := New().Check(context.Background(), strings.Repeat("x = 1\n", 8000), nil); len(fs) != 0 {
		t.Fatalf("48 KB body rejected: %v", fs[:1])
	}
	if fs := New().Check(context.Background(), strings.Repeat("x = 1\n", 20000), nil); !hasRule(fs, RuleCodeTooLarge) {
		t.Fatalf("120 KB body: want code-too-large, got %d findings", len(fs))
	}
}

// The rules table's max_code_bytes (what the in-child checker enforces)
// is the contract's default code cap: a body the host and the plugins
// accept by default is one the child accepts.
func TestMaxCodeBytesIsTheContracts(t *testing.T) {
	if MaxCodeBytes() != shared.DefaultMaxCodeBytes {
		t.Fatalf("rules.json limits.max_code_bytes = %d, shared.DefaultMaxCodeBytes = %d: keep them equal", MaxCodeBytes(), shared.DefaultMaxCodeBytes)
	}
}

func TestValidationTimeout(t *testing.T) {
	code := strings.Repeat("x = [a.b(c, d[e]) for a in range(10) if a]\n", 1500)
	v := New(WithTimeout(time.Microsecond))
	fs := v.Check(context.Background(), code, nil)
	if !hasRule(fs, RuleValidationTimeout) {
		t.Fatalf("want validation-timeout, got %v", rulesOf(fs))
	}
	// A cancelled context is a timeout too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if fs := New().Check(ctx, code, nil); !hasRule(fs, RuleValidationTimeout) {
		t.Fatalf("cancelled ctx: want validation-timeout, got %v", rulesOf(fs))
	}
}

func TestPathologicalInputsDoNotHang(t *testing.T) {
	v := New()
	inputs := []string{
		strings.Repeat("(", 60000),
		strings.Repeat("-", 60000) + "1",
		strings.Repeat("[", 30000) + strings.Repeat("]", 30000),
		strings.Repeat("if x:\n", 5000),
		strings.Repeat("f'{", 10000),
		strings.Repeat("\\\n", 20000),
		"x = " + strings.Repeat("a.", 30000) + "b",
		strings.Repeat("lambda: ", 8000) + "1",
		strings.Repeat("not ", 15000) + "x",
	}
	for i, in := range inputs {
		start := time.Now()
		fs := v.Check(context.Background(), in, nil)
		if len(fs) == 0 {
			t.Errorf("input %d accepted", i)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("input %d took %v", i, d)
		}
	}
}

func TestEveryFindingReported(t *testing.T) {
	code := "import os\nx = eval\ny = ().__class__\nz = d['__globals__']\nreturn g.gi_frame"
	fs := New().Check(context.Background(), code, nil)
	want := []string{"import-not-allowed", "forbidden-builtin", "dunder-attribute", "dunder-subscript", "introspection-attribute"}
	got := rulesOf(fs)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v want %v", got, want)
	}
	for i, f := range fs {
		if f.Line != i+1 {
			t.Errorf("finding %d on line %d", i, f.Line)
		}
	}
}

func TestPositionsCountCharacters(t *testing.T) {
	fs := New().Check(context.Background(), "s = 'héllo'; x = eval\r\ny = 1\rz = exec", nil)
	if len(fs) != 2 {
		t.Fatalf("got %v", fs)
	}
	if fs[0].Line != 1 || fs[0].Column != 18 || fs[0].Snippet != "eval" {
		t.Errorf("first: %+v", fs[0])
	}
	if fs[1].Line != 3 || fs[1].Column != 5 {
		t.Errorf("second (after a bare CR): %+v", fs[1])
	}
}

func TestConcurrentUse(t *testing.T) {
	v := New()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				a := attacks[(g*50+i)%len(attacks)]
				if fs := v.CheckWith(context.Background(), a.code, a.allow, a.features()); !hasRule(fs, a.rule) {
					t.Errorf("%s: got %v", a.name, rulesOf(fs))
				}
				b := benign[(g*50+i)%len(benign)]
				if fs := v.CheckWith(context.Background(), b.code, b.allow, b.features()); len(fs) != 0 {
					t.Errorf("%s: got %v", b.name, fs)
				}
			}
		}()
	}
	wg.Wait()
}

func TestRulesTable(t *testing.T) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(RulesJSON(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"schema", "safe_builtins", "limits", "rules", "forbidden_names", "forbidden_attributes", "dunder", "private"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("rules.json lacks %q", k)
		}
	}
	tb := defaultTable
	for _, b := range tb.SafeBuiltins {
		if _, bad := tb.ForbiddenNames[b]; bad && tb.BuiltinShapes[b] == "" {
			t.Errorf("safe builtin %q is also forbidden (and has no allowed shape)", b)
		}
		if isDunder(b) || strings.HasPrefix(b, "_") {
			t.Errorf("safe builtin %q is private", b)
		}
	}
	for _, must := range []string{"eval", "exec", "compile", "__import__", "open", "globals", "locals", "vars", "input", "breakpoint",
		"getattr", "setattr", "delattr", "hasattr", "type", "dir", "super", "__build_class__"} {
		if tb.ForbiddenNames[must] == "" {
			t.Errorf("%s is not forbidden", must)
		}
	}
	for _, d := range tb.Dunder.Allow {
		for _, orig := range []string{"__class__", "__bases__", "__subclasses__", "__mro__", "__globals__", "__builtins__", "__import__",
			"__loader__", "__spec__", "__code__", "__closure__", "__getattribute__", "__reduce__", "__reduce_ex__", "__dict__",
			"__init_subclass__", "__init__", "__new__", "__self__", "__func__", "__wrapped__", "__traceback__"} {
			if d == orig {
				t.Errorf("dunder allowlist contains %s", d)
			}
		}
	}
	if _, err := loadTable([]byte(`{"schema":2}`)); err == nil {
		t.Error("schema 2 accepted")
	}
	if _, err := loadTable([]byte(`{"schema":1,"rules":{},"forbidden_names":{"x":"nope"}}`)); err == nil {
		t.Error("undescribed rule accepted")
	}
}

func TestNilContextAndEmpty(t *testing.T) {
	//lint:ignore SA1012 nil ctx is tolerated on purpose
	if fs := New().Check(nil, "", nil); len(fs) != 0 { //nolint:staticcheck
		t.Fatalf("empty code: %v", fs)
	}
	if fs := New().Check(context.Background(), "\xff\xfe", nil); !hasRule(fs, RuleParseError) {
		t.Fatalf("invalid utf-8: %v", fs)
	}
}

func ExampleValidator_Check() {
	v := New()
	for _, f := range v.Check(context.Background(), "import os\nreturn os.system('id')", []string{"re"}) {
		fmt.Println(f)
	}
	// Output: 1:8: import-not-allowed: this module is not in the allowed imports: module "os"; instead: use only the modules in allowed_imports, or ask the operator to allow the module ("os")
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	v := New(WithCache(2))
	plain := New()
	bad := "import os\nreturn os.getcwd()"
	good := "return 1 + 1"
	for i := 0; i < 3; i++ {
		for _, c := range []struct {
			code  string
			allow []string
		}{{bad, nil}, {good, nil}, {bad, []string{"os"}}, {bad, []string{"os", "os"}}, {"return 1 +", nil}} {
			got, want := v.Check(ctx, c.code, c.allow), plain.Check(ctx, c.code, c.allow)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("cached verdict for %q %v = %v, want %v", c.code, c.allow, got, want)
			}
		}
	}
	// Findings handed out are copies: changing them changes no later verdict.
	f := v.Check(ctx, bad, nil)
	if len(f) == 0 {
		t.Fatal("want findings")
	}
	f[0].Rule = "changed"
	if g := v.Check(ctx, bad, nil); g[0].Rule == "changed" {
		t.Fatal("a caller changed a cached verdict")
	}
	// Bounded.
	if n := v.cache.order.Len(); n > 2 {
		t.Fatalf("cache holds %d entries, max 2", n)
	}
	// A cancelled check is not cached.
	c := New(WithCache(8))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	c.Check(cctx, "return 2", nil)
	if n := c.cache.order.Len(); n != 0 {
		t.Fatalf("a cancelled check was cached (%d entries)", n)
	}
}

package rules

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// mutate decodes the embedded table into a generic map, lets f change it and
// returns it encoded again.
func mutate(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(JSON(), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDefaultDecodes(t *testing.T) {
	tb := Default()
	if tb.Schema != Schema || tb.Limits.MaxCodeBytes <= 0 || len(tb.SafeBuiltins) == 0 || len(tb.Runtime.AuditBlock) == 0 {
		t.Fatalf("embedded table decoded incompletely: schema %d, limits %+v, %d safe builtins, %d audit events",
			tb.Schema, tb.Limits, len(tb.SafeBuiltins), len(tb.Runtime.AuditBlock))
	}
	if _, ok := tb.DangerousImports["os"]; !ok {
		t.Error("os is not a dangerous import")
	}
	ids := tb.IDs()
	for i := 1; i < len(ids); i++ {
		if ids[i-1] >= ids[i] {
			t.Fatalf("IDs not sorted/unique at %d: %q, %q", i, ids[i-1], ids[i])
		}
	}
	for _, id := range []string{RuleParseError, RuleCodeTooLarge, RuleNestingTooDeep, RuleValidationTimeout, RuleDunderSubscript, RuleForbiddenString} {
		if txt, ok := tb.Rules[id]; !ok || txt.Message == "" || txt.Why == "" {
			t.Errorf("fixed rule %q has no message/why: %+v", id, txt)
		}
	}
	if !strings.Contains(CheckerPy(), "def _orq_check") {
		t.Error("CheckerPy does not define _orq_check")
	}
}

func TestDangerousIsACopy(t *testing.T) {
	d := Default().Dangerous()
	delete(d, "os")
	if _, ok := Default().DangerousImports["os"]; !ok {
		t.Fatal("changing Dangerous()'s map changed the shared table")
	}
}

func TestDecodeRefusesBrokenTables(t *testing.T) {
	cases := map[string][]byte{
		"not json":     []byte(`{"schema": 1,`),
		"wrong schema": mutate(t, func(m map[string]any) { m["schema"] = 2 }),
		"zero limit": mutate(t, func(m map[string]any) {
			m["limits"].(map[string]any)["max_depth"] = 0
		}),
		"no dangerous imports": mutate(t, func(m map[string]any) { delete(m, "dangerous_imports") }),
		"undescribed forbidden-name rule": mutate(t, func(m map[string]any) {
			m["forbidden_names"].(map[string]any)["eval"] = "no-such-rule"
		}),
		"undescribed fixed rule": mutate(t, func(m map[string]any) {
			delete(m["rules"].(map[string]any), RuleParseError)
		}),
		"empty class rule": mutate(t, func(m map[string]any) { m["class_rule"] = "" }),
		"submodule outside its package": mutate(t, func(m map[string]any) {
			m["package_submodules"] = map[string]any{"matplotlib": []any{"os"}}
		}),
		"submodule of a prefix-named package": mutate(t, func(m map[string]any) {
			m["package_submodules"] = map[string]any{"json": []any{"jsonx.tool"}}
		}),
		"dangerous package with submodules": mutate(t, func(m map[string]any) {
			m["package_submodules"] = map[string]any{"os": []any{"os.path"}}
		}),
	}
	for name, b := range cases {
		if _, err := Decode(b); !errors.Is(err, ErrInvalidTable) {
			t.Errorf("%s: Decode = %v, want ErrInvalidTable", name, err)
		}
	}
	if _, err := Decode(mutate(t, func(map[string]any) {})); err != nil {
		t.Fatalf("round-tripped embedded table refused: %v", err)
	}
}

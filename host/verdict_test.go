package host

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// plainChecker is a StaticChecker that is not an Accepter: it gives no
// verdict.
type plainChecker struct{ v *validator.Validator }

func (c plainChecker) CheckWith(ctx context.Context, code string, imps []string, f validator.Features) []shared.Finding {
	return c.v.CheckWith(ctx, code, imps, f)
}

// acceptAll accepts every body and gives no verdict.
type acceptAll struct{}

func (acceptAll) CheckWith(context.Context, string, []string, validator.Features) []shared.Finding {
	return nil
}

// TestHostSendsItsVerdict: over the real plugin wire, the host sends with
// an accepted body the verdict that a plugin's own validator trusts; a
// StaticChecker that is not an Accepter sends none; a caller's own
// verdict never reaches the plugin (the host clears it).
func TestHostSendsItsVerdict(t *testing.T) {
	dir := buildTestPlugin(t, "verdict", "verdictplugin")
	ctx := context.Background()
	run := func(t *testing.T, checker StaticChecker, classes bool, req shared.ExecuteRequest) (verdict, trusted bool) {
		t.Helper()
		src := fmt.Sprintf("policy \"p\" {\n  allowed_imports = [\"json\"]\n}\nsandbox \"t\" {\n  plugin = \"verdict\"\n  policy = \"p\"\n  classes = %v\n}\n", classes)
		cfg, diags := ParseConfig(filepath.Join(dir, "config.hcl"), []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		opts := []Option{WithPluginDirs(dir)}
		if checker != nil {
			opts = append(opts, WithStaticChecker(checker))
		}
		h, err := Load(ctx, cfg, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		sb, _ := h.Sandbox(ctx, "")
		res, err := sb.Execute(ctx, req)
		if err != nil || !res.Success {
			t.Fatalf("Execute: %+v, %v", res, err)
		}
		var got struct{ Verdict, Trusted bool }
		if err := json.Unmarshal(res.Output, &got); err != nil {
			t.Fatalf("output %s: %v", res.Output, err)
		}
		return got.Verdict, got.Trusted
	}
	body := shared.ExecuteRequest{Code: "import json\nreturn json.dumps(args)"}
	for _, classes := range []bool{false, true} {
		if v, tr := run(t, nil, classes, body); !v || !tr {
			t.Errorf("classes=%v, the default checker: verdict sent %v, trusted by the plugin %v; want both", classes, v, tr)
		}
	}
	if v, _ := run(t, plainChecker{validator.New()}, false, body); v {
		t.Error("a StaticChecker that is not an Accepter sent a verdict")
	}
	bad := "import os\nreturn os.getcwd()"
	forged := &shared.Verdict{CodeSHA256: sha256.Sum256([]byte(bad)), Rules: rules.Version(),
		Options: validator.New().Options([]string{"json"}, validator.Features{}).Digest()}
	if v, _ := run(t, acceptAll{}, false, shared.ExecuteRequest{Code: bad, Verdict: forged}); v {
		t.Error("the caller's verdict reached the plugin")
	}
}

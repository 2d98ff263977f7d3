package host

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/orqest/sandbox/internal/warmpool"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

const fuzzConfigName = "/fuzz/config.hcl"

// fuzzBackendSchema is a config schema like the docker plugin's: scalar
// attributes and the nested pool and promotion blocks.
var fuzzBackendSchema = []shared.ConfigAttribute{
	{Name: "image", Type: "string"},
	{Name: "memory_mb", Type: "number"},
	{Name: "network", Type: "string"},
	{Name: "require", Type: "list(string)"},
	{Name: "debug", Type: "bool"},
	warmpool.Schema("container"),
	toollib.Schema(),
}

// FuzzParseConfig: the policy loader never panics; every diagnostic points
// into the file (its name, line and column from 1, bytes inside the
// source); a policy it accepts resolves to limits Prepare accepts as they
// are, and written back as HCL it parses again to the same values.
func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{"../config.hcl", "../bench.hcl", "default.hcl", "../examples/thirdparty-plugin/example.hcl"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		goodConfig,
		"",
		"sandbox \"a\" { plugin = \"subprocess\" }\n",
		"policy \"default\" {\n  timeout = \"5s\"\n  memory_mb = 64\n  ceiling {\n    timeout = \"1m\"\n    memory_mb = 512\n    max_output_bytes = 8388608\n  }\n  max_concurrency = 2\n  max_queue = 0\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n",
		"sessions {\n  max_sessions = 4\n  max_sessions_per_user = 2\n  reclaim_idle_after = \"0s\"\n}\nsandbox \"d\" {\n  plugin = \"docker\"\n  idle_timeout = \"2s\"\n  max_lifetime = \"1h\"\n  stateful = true\n  config {\n    image = \"x\"\n    pool {\n      size = 2\n    }\n    promotion {\n      policy = \"manual\"\n    }\n  }\n}\n",
		"sandbox \"t0\" {\n  plugin = \"inprocess\"\n  unsafe = true\n  unsafe_shared = true\n  classes = false\n}\n",
		"sandbox \"d\" {\n  plugin = \"docker\"\n  network {\n    allow = [\"api.example.com:443\", \"*.internal.example\", \"10.0.0.0/8:5432\", \"[fd00::/8]:443\"]\n    deny = [\"secret.internal.example\"]\n    budget_bytes = 1048576\n    max_connections = 4\n  }\n}\n",
		"sandbox \"d\" {\n  plugin = \"docker\"\n  network {\n    allow = [\"*\", 1, \"x:0\", \"a b\"]\n    budget_bytes = -1\n  }\n}\n",
		"policy \"p\" {\n  allowed_imports = [\"os\", \"re\"]\n  allow_dangerous_imports = [\"os\"]\n  allow_unreviewed_imports = [\"yaml\"]\n  allowed_packages = [\"numpy\", \"pandas==2\"]\n}\nsandbox \"a\" {\n  plugin = \"subprocess\"\n  policy = \"p\"\n}\n",
		"sandbox \"a\" {\n  plugin = \"subprocess\"\n  promotion { policy = \"auto\" }\n}\n",
		"sandbox \"a\" {\n  plugin = \"subprocess\"\n  policy = \n}\n",
		"policy \"default\" {\n  timeout = \"${var.x}\"\n  memory_mb = 1e30\n}\nsandbox \"a\" { plugin = \"x\" }\n",
		"policy \"default\" { memory_mb = 9223372036854775807 }\nsandbox \"a\" { plugin = \"x\" }\n",
		"policy \"default\" { timeout = \"2562047h47m16.854775807s\" }\nsandbox \"a\" { plugin = \"x\" }\n",
		"plugin \"subprocess\" {\n  path = \"bin/p\"\n  sha256 = \"" + strings.Repeat("AB", 32) + "\"\n}\nsandbox \"a\" { plugin = \"subprocess\" }\n",
		"sandbox \"\u00e9\" { plugin = \"A\" }\nsandbox \"\u00e9\" { plugin = \"A\" }\n",
		"default_sandbox = \"nope\"\naudit_log = \"/dev/null\"\n",
		"sandbox \"a\" {\n  plugin = \"x\"\n  config {\n    memory_mb = \"lots\"\n    colour = true\n    pool { bogus = 1 }\n  }\n}\n",
		"policy \"p\" {\n  allowed_imports = [\"a b\", \"\", \"x/y\"]\n}\nsandbox \"a\" { plugin = \"x\" }\n",
		"\xef\xbb\xbfsandbox \"a\" { plugin = \"x\" }\n",
		"sandbox \"a\" { plugin = \"x\" }\n\x00\xff\n",
		"sandbox a { plugin = x }\n",
		"sandbox \"a\" \"b\" { plugin = \"x\" }\n",
		"sandbox \"a\" {\n  plugin = <<EOT\nsubprocess\nEOT\n}\n",
		"/* unterminated",
		"policy \"p\" { timeout = [\"5s\"] }\nsandbox \"a\" { plugin = \"x\" }\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, diags := ParseConfig(fuzzConfigName, src)
		if cfg == nil {
			t.Fatal("nil config")
		}
		checkDiags(t, "ParseConfig", src, diags)
		var buf bytes.Buffer
		if err := WriteDiagnostics(&buf, cfg.Files, diags); err != nil {
			t.Fatalf("WriteDiagnostics: %v", err)
		}
		if diags.HasErrors() {
			if msg := (&DiagnosticsError{Diagnostics: diags, Files: cfg.Files}).Error(); !strings.HasPrefix(msg, fuzzConfigName+":") {
				t.Fatalf("error text %q does not start with the file name", msg)
			}
			return
		}
		checkDiags(t, "LintPolicy", src, LintPolicy(cfg))
		checkResolved(t, cfg)
		for _, sb := range cfg.Sandboxes {
			_, d := decodeBackendConfig(sb, sb.Plugin, fuzzBackendSchema)
			checkDiags(t, "decodeBackendConfig", src, d)
		}

		// Written back from the resolved values, the policy parses again to
		// the same values.
		again := writeConfig(cfg)
		cfg2, diags := ParseConfig(fuzzConfigName, again)
		if diags.HasErrors() {
			t.Fatalf("the policy written back does not parse: %v\n%s", diags, again)
		}
		if a, b := describeConfig(cfg), describeConfig(cfg2); a != b {
			t.Fatalf("written back and parsed again:\n%s\nwant\n%s\nfrom\n%s", b, a, again)
		}
	})
}

// checkDiags fails unless every diagnostic locates itself in the fuzzed
// file.
func checkDiags(t *testing.T, what string, src []byte, diags hcl.Diagnostics) {
	t.Helper()
	for _, d := range diags {
		r := d.Subject
		switch {
		case r == nil:
			t.Fatalf("%s: diagnostic without a source range: %s: %s", what, d.Summary, d.Detail)
		case r.Filename != fuzzConfigName:
			t.Fatalf("%s: diagnostic in %q: %s", what, r.Filename, d.Summary)
		case r.Start.Line < 1 || r.Start.Column < 1 || r.End.Line < r.Start.Line:
			t.Fatalf("%s: diagnostic at %d:%d-%d:%d: %s", what, r.Start.Line, r.Start.Column, r.End.Line, r.End.Column, d.Summary)
		case r.Start.Byte < 0 || r.Start.Byte > r.End.Byte || r.End.Byte > len(src):
			t.Fatalf("%s: diagnostic at bytes %d-%d of %d: %s", what, r.Start.Byte, r.End.Byte, len(src), d.Summary)
		}
	}
}

// checkResolved fails unless the accepted policy resolves to sane values.
func checkResolved(t *testing.T, cfg *Config) {
	t.Helper()
	if len(cfg.Sandboxes) == 0 {
		t.Fatal("accepted without a sandbox")
	}
	if _, ok := cfg.SandboxConfigNamed(cfg.DefaultSandboxName()); !ok {
		t.Fatalf("default sandbox %q is not declared", cfg.DefaultSandboxName())
	}
	for _, sb := range cfg.Sandboxes {
		if !nameRe.MatchString(sb.Name) || !pluginNameRe.MatchString(sb.Plugin) {
			t.Fatalf("accepted names %q, plugin %q", sb.Name, sb.Plugin)
		}
		p := cfg.SandboxPolicy(sb)
		switch {
		case p.Timeout <= 0 || p.MaxTimeout < p.Timeout || p.MaxTimeout > shared.MaxTimeout:
			t.Fatalf("sandbox %q: timeout %v, ceiling %v", sb.Name, p.Timeout, p.MaxTimeout)
		case p.MemoryMB < shared.MinMemoryMB || p.MaxMemoryMB < p.MemoryMB || p.MaxMemoryMB > shared.MaxMemoryMB:
			t.Fatalf("sandbox %q: memory_mb %d, ceiling %d", sb.Name, p.MemoryMB, p.MaxMemoryMB)
		case p.MaxOutputBytes <= 0 || p.MaxOutputCeiling < p.MaxOutputBytes:
			t.Fatalf("sandbox %q: max_output_bytes %d, ceiling %d", sb.Name, p.MaxOutputBytes, p.MaxOutputCeiling)
		case p.MaxCodeBytes <= 0 || p.MaxArgsBytes <= 0 || p.MaxConcurrency <= 0 || p.MaxQueue < 0:
			t.Fatalf("sandbox %q: limits %+v", sb.Name, p)
		}
		// The policy's own values are a request Prepare accepts unchanged.
		pr, err := shared.Prepare(shared.ExecuteRequest{}, p.limits())
		if err != nil {
			t.Fatalf("sandbox %q: Prepare refuses the policy's defaults: %v", sb.Name, err)
		}
		if pr.Timeout != p.Timeout || pr.MemoryMB != p.MemoryMB || pr.MaxOutputBytes != p.MaxOutputBytes || pr.CPUSeconds() < 1 || pr.CPUSeconds() > math.MaxInt32 {
			t.Fatalf("sandbox %q: resolved %+v from %+v", sb.Name, pr.Resolved, p)
		}
		// At its ceilings too.
		if _, err := shared.Prepare(shared.ExecuteRequest{Timeout: p.MaxTimeout, MemoryMB: p.MaxMemoryMB, MaxOutputBytes: p.MaxOutputCeiling}, p.limits()); err != nil {
			t.Fatalf("sandbox %q: Prepare refuses the policy's ceilings: %v", sb.Name, err)
		}
		if a := newAdmission(p.MaxConcurrency, p.MaxQueue); cap(a.slots) != p.MaxConcurrency {
			t.Fatalf("sandbox %q: %d slots for max_concurrency %d", sb.Name, cap(a.slots), p.MaxConcurrency)
		}
		l := cfg.SandboxLifecycle(sb)
		if l.IdleTimeout <= 0 || l.MaxLifetime <= 0 {
			t.Fatalf("sandbox %q: lifecycle %+v", sb.Name, l)
		}
	}
	if l := cfg.SessionLimits(); l.MaxSessions <= 0 || l.MaxSessionsPerUser <= 0 || l.ReclaimIdleAfter < 0 {
		t.Fatalf("session limits %+v", l)
	}
}

// writeConfig writes cfg back as HCL from its resolved values (the
// backend config blocks left out).
func writeConfig(cfg *Config) []byte {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	str := func(b *hclwrite.Body, name, v string) { b.SetAttributeValue(name, cty.StringVal(v)) }
	num := func(b *hclwrite.Body, name string, v int) { b.SetAttributeValue(name, cty.NumberIntVal(int64(v))) }
	list := func(b *hclwrite.Body, name string, vs []string) {
		if vs == nil {
			return
		}
		vals := make([]cty.Value, len(vs))
		for i, v := range vs {
			vals[i] = cty.StringVal(v)
		}
		if len(vals) == 0 {
			b.SetAttributeValue(name, cty.ListValEmpty(cty.String))
			return
		}
		b.SetAttributeValue(name, cty.ListVal(vals))
	}
	if cfg.PluginDir != "" {
		str(body, "plugin_dir", cfg.PluginDir)
	}
	if cfg.DefaultSandbox != "" {
		str(body, "default_sandbox", cfg.DefaultSandbox)
	}
	if cfg.AuditLog != "" {
		str(body, "audit_log", cfg.AuditLog)
	}
	if cfg.Sessions != nil {
		l := cfg.SessionLimits()
		b := body.AppendNewBlock("sessions", nil).Body()
		num(b, "max_sessions", l.MaxSessions)
		num(b, "max_sessions_per_user", l.MaxSessionsPerUser)
		str(b, "reclaim_idle_after", l.ReclaimIdleAfter.String())
	}
	for _, p := range cfg.Plugins {
		b := body.AppendNewBlock("plugin", []string{p.Name}).Body()
		if p.Path != "" {
			str(b, "path", p.Path)
		}
		if p.SHA256 != "" {
			str(b, "sha256", p.SHA256)
		}
	}
	for _, pc := range cfg.Policies {
		p, _ := cfg.Policy(pc.Name)
		b := body.AppendNewBlock("policy", []string{p.Name}).Body()
		list(b, "allowed_imports", p.AllowedImports)
		list(b, "allowed_packages", p.AllowedPackages)
		list(b, "allow_dangerous_imports", p.AllowDangerousImports)
		list(b, "allow_unreviewed_imports", p.AllowUnreviewedImports)
		str(b, "timeout", p.Timeout.String())
		num(b, "memory_mb", p.MemoryMB)
		num(b, "max_output_bytes", p.MaxOutputBytes)
		num(b, "max_code_bytes", p.MaxCodeBytes)
		num(b, "max_args_bytes", p.MaxArgsBytes)
		num(b, "max_concurrency", p.MaxConcurrency)
		num(b, "max_queue", p.MaxQueue)
		c := b.AppendNewBlock("ceiling", nil).Body()
		str(c, "timeout", p.MaxTimeout.String())
		num(c, "memory_mb", p.MaxMemoryMB)
		num(c, "max_output_bytes", p.MaxOutputCeiling)
	}
	for _, s := range cfg.Sandboxes {
		b := body.AppendNewBlock("sandbox", []string{s.Name}).Body()
		str(b, "plugin", s.Plugin)
		if s.Policy != "" {
			str(b, "policy", s.Policy)
		}
		b.SetAttributeValue("unsafe", cty.BoolVal(s.Unsafe))
		b.SetAttributeValue("unsafe_shared", cty.BoolVal(s.UnsafeShared))
		b.SetAttributeValue("classes", cty.BoolVal(cfg.SandboxPolicy(s).Classes))
		b.SetAttributeValue("stateful", cty.BoolVal(s.Stateful))
		l := cfg.SandboxLifecycle(s)
		str(b, "idle_timeout", l.IdleTimeout.String())
		str(b, "max_lifetime", l.MaxLifetime.String())
	}
	return f.Bytes()
}

// describeConfig renders what a policy resolves to, for comparison.
func describeConfig(cfg *Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin_dir=%q default=%q audit=%q sessions=%+v\n", cfg.PluginDir, cfg.DefaultSandboxName(), cfg.AuditLog, cfg.SessionLimits())
	for _, p := range cfg.Plugins {
		fmt.Fprintf(&b, "plugin %q path=%q sha256=%q\n", p.Name, p.Path, p.SHA256)
	}
	for _, s := range cfg.Sandboxes {
		p := cfg.SandboxPolicy(s)
		fmt.Fprintf(&b, "sandbox %q plugin=%q unsafe=%v shared=%v stateful=%v lifecycle=%+v policy=%q\n  %s %s %s %s %v %d %d %d %d %v %d %d %d %d %v\n",
			s.Name, s.Plugin, s.Unsafe, s.UnsafeShared, s.Stateful, cfg.SandboxLifecycle(s), s.Policy,
			quoteAll(p.AllowedImports), quoteAll(p.AllowedPackages), quoteAll(p.AllowDangerousImports), quoteAll(p.AllowUnreviewedImports),
			p.Timeout, p.MemoryMB, p.MaxOutputBytes, p.MaxCodeBytes, p.MaxArgsBytes, p.MaxTimeout, p.MaxMemoryMB, p.MaxOutputCeiling, p.MaxConcurrency, p.MaxQueue, p.Classes)
	}
	return b.String()
}

func quoteAll(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, " ") + "]"
}

package host

import (
	"bytes"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// DefaultConfigFile is the file LoadFile and the CLI read when no path is
// given, relative to the working directory.
const DefaultConfigFile = "config.hcl"

// EmbeddedConfigName is the file name diagnostics use for the embedded
// default policy.
const EmbeddedConfigName = "<embedded>/default.hcl"

//go:embed default.hcl
var defaultHCL []byte

// Config is an operator policy file decoded with gohcl. Its exported fields
// mirror the HCL schema:
//
//	plugin_dir      = "bin"       # optional; relative to the config file's directory
//	default_sandbox = "tier1"     # optional; else the only (or first) sandbox
//	audit_log       = "audit.jsonl"  # optional; JSON-lines event log, relative to the config file
//
//	sessions {                    # optional; host-wide bounds on open sessions
//	  max_sessions          = 64  # across every sandbox
//	  max_sessions_per_user = 8   # per user id (an MCP client's identity)
//	  reclaim_idle_after    = "1m"  # at a cap, the LRU session idle this long makes room
//	}
//
//	plugin "subprocess" {         # optional; declares a plugin explicitly
//	  path   = "bin/orqest-sandbox-plugin-subprocess"  # optional explicit binary
//	  sha256 = "…"                # optional; verified before every launch
//	}
//
//	policy "default" {
//	  allowed_imports  = ["re", "math"]   # default-deny: [] unless listed
//	  allowed_packages = []
//	  allow_dangerous_imports = []     # acknowledges dangerous allowed_imports (os, sys, ...)
//	  timeout          = "5s"
//	  memory_mb        = 128
//	  max_output_bytes = 1048576
//	  max_code_bytes   = 65536
//	  max_args_bytes   = 1048576
//	}
//
//	sandbox "tier1" {
//	  plugin = "subprocess"       # a declared or discoverable plugin
//	  policy = "default"          # optional; else policy "default" or built-in defaults
//	  unsafe = false              # required true by tier-0 backends
//	  unsafe_shared = false       # required true to serve tier 0 to many callers (mcp serve)
//	  classes = true              # class statements; default true
//	  stateful = false            # session calls stateful by default (tier 2)
//	  idle_timeout = "10m"        # a session unused this long is closed (session tiers)
//	  max_lifetime = "24h"        # a session open this long is closed
//	  config { mode = "spawn" }   # backend-specific; checked against the plugin's schema
//	  network { allow = ["api.example.com:443"] }  # egress rules (NetworkConfig); none: no network
//	}
//
// Use ParseConfig, LoadConfigFile or DefaultConfig to obtain one; they also
// run the semantic checks that need no plugin (names, references to
// policies, durations, limits). Load checks the rest (plugins, checksums).
type Config struct {
	PluginDir      string           `hcl:"plugin_dir,optional"`
	DefaultSandbox string           `hcl:"default_sandbox,optional"`
	AuditLog       string           `hcl:"audit_log,optional"`
	Plugins        []*PluginConfig  `hcl:"plugin,block"`
	Policies       []*PolicyConfig  `hcl:"policy,block"`
	Sandboxes      []*SandboxConfig `hcl:"sandbox,block"`
	// Sessions is the top-level `sessions {}` block: the host-wide caps
	// on open sessions (SessionLimits resolves it).
	Sessions *SessionsConfig `hcl:"sessions,block"`

	PluginDirRange      hcl.Range `hcl:"plugin_dir,attr_value_range"`
	DefaultSandboxRange hcl.Range `hcl:"default_sandbox,attr_value_range"`
	AuditLogRange       hcl.Range `hcl:"audit_log,attr_value_range"`

	// Filename is the path the policy was read from (EmbeddedConfigName
	// for the embedded default).
	Filename string
	// Dir is the directory relative paths (plugin_dir, plugin paths) are
	// resolved against: the config file's directory, or the working
	// directory for a config parsed from memory.
	Dir string
	// Embedded is true for the embedded default policy.
	Embedded bool
	// Files holds the parsed sources by file name, for rendering
	// diagnostics with source snippets (see WriteDiagnostics).
	Files map[string]*hcl.File

	policies map[string]Policy
	fileRng  hcl.Range
}

// PluginConfig is a `plugin "name" {}` block.
type PluginConfig struct {
	Name   string `hcl:"name,label"`
	Path   string `hcl:"path,optional"`
	SHA256 string `hcl:"sha256,optional"`

	DefRange    hcl.Range `hcl:",def_range"`
	PathRange   hcl.Range `hcl:"path,attr_value_range"`
	SHA256Range hcl.Range `hcl:"sha256,attr_value_range"`
}

// PolicyConfig is a `policy "name" {}` block as written. Resolved values are
// available from Config.Policy.
type PolicyConfig struct {
	Name            string   `hcl:"name,label"`
	AllowedImports  []string `hcl:"allowed_imports,optional"`
	AllowedPackages []string `hcl:"allowed_packages,optional"`
	Timeout         *string  `hcl:"timeout,optional"`
	MemoryMB        *int     `hcl:"memory_mb,optional"`
	MaxOutputBytes  *int     `hcl:"max_output_bytes,optional"`
	MaxCodeBytes    *int     `hcl:"max_code_bytes,optional"`
	MaxArgsBytes    *int     `hcl:"max_args_bytes,optional"`

	// AllowDangerousImports acknowledges modules of allowed_imports that
	// the rules table lists as dangerous (os, sys, subprocess, ...): a run
	// refuses a dangerous module unless it is named here as well.
	AllowDangerousImports []string `hcl:"allow_dangerous_imports,optional"`
	// AllowUnreviewedImports acknowledges modules of allowed_imports that
	// have no reviewed surface in the rules table (module_surfaces).
	AllowUnreviewedImports []string `hcl:"allow_unreviewed_imports,optional"`

	// Ceiling is how far a caller may raise the limits above (timeout,
	// memory_mb, max_output_bytes); without it the policy's values are the
	// ceilings.
	Ceiling *CeilingConfig `hcl:"ceiling,block"`

	// MaxConcurrency caps the executions of one sandbox in flight at once
	// (each is a process, or a container's child); MaxQueue caps the callers
	// waiting for a slot. A caller waits at most its call's timeout.
	MaxConcurrency *int `hcl:"max_concurrency,optional"`
	MaxQueue       *int `hcl:"max_queue,optional"`

	DefRange            hcl.Range `hcl:",def_range"`
	AllowedImportsRange hcl.Range `hcl:"allowed_imports,attr_value_range"`
	// AllowedPackagesRange locates allowed_packages (dependencies.go).
	AllowedPackagesRange hcl.Range `hcl:"allowed_packages,attr_value_range"`
	AllowDangerousRange  hcl.Range `hcl:"allow_dangerous_imports,attr_value_range"`
	TimeoutRange         hcl.Range `hcl:"timeout,attr_value_range"`
	MemoryMBRange        hcl.Range `hcl:"memory_mb,attr_value_range"`
	MaxOutputBytesRange  hcl.Range `hcl:"max_output_bytes,attr_value_range"`
	MaxCodeBytesRange    hcl.Range `hcl:"max_code_bytes,attr_value_range"`
	MaxArgsBytesRange    hcl.Range `hcl:"max_args_bytes,attr_value_range"`
	MaxConcurrencyRange  hcl.Range `hcl:"max_concurrency,attr_value_range"`
	MaxQueueRange        hcl.Range `hcl:"max_queue,attr_value_range"`
}

// CeilingConfig is a policy's `ceiling {}` block: the most a caller may ask
// for, per limit. An attribute left out keeps the policy's own value as the
// ceiling; a ceiling below the policy's value is an error.
type CeilingConfig struct {
	Timeout        *string `hcl:"timeout,optional"`
	MemoryMB       *int    `hcl:"memory_mb,optional"`
	MaxOutputBytes *int    `hcl:"max_output_bytes,optional"`

	TimeoutRange        hcl.Range `hcl:"timeout,attr_value_range"`
	MemoryMBRange       hcl.Range `hcl:"memory_mb,attr_value_range"`
	MaxOutputBytesRange hcl.Range `hcl:"max_output_bytes,attr_value_range"`
}

// SandboxConfig is a `sandbox "name" {}` block: a plugin, a policy and the
// plugin's own configuration.
type SandboxConfig struct {
	Name   string `hcl:"name,label"`
	Plugin string `hcl:"plugin"`
	Policy string `hcl:"policy,optional"`
	Unsafe bool   `hcl:"unsafe,optional"`
	// Classes turns class statements (dataclasses, user exception classes)
	// on or off for the sandbox. Unset, they are on, tier 0 included: every
	// tier runs the C class guard (runner/forkcore/audit.h), which refuses
	// metaclasses, unlisted class dunders and attributes set on classes the
	// call did not build.
	Classes *bool `hcl:"classes,optional"`
	// UnsafeShared lets a long-lived server with many callers (`mcp serve`)
	// use a backend that does not give each execution a fresh process
	// (tier 0): there, code that escapes the Python layers in one call can
	// stay behind for the next caller. See Sandbox.CheckSharedServing.
	UnsafeShared bool `hcl:"unsafe_shared,optional"`
	// Stateful makes the sandbox's session calls stateful by default
	// (shared.ExecuteRequest.Stateful): a call with a session runs in the
	// session's long-lived interpreter unless it asks for a fresh process
	// (Stateless). It needs a plugin with the stateful_sessions capability;
	// calls without a session stay stateless.
	Stateful bool `hcl:"stateful,optional"`
	// IdleTimeout and MaxLifetime bound the sandbox's sessions: one unused
	// for IdleTimeout, or open for MaxLifetime, is closed by the host
	// (Go durations; Config.SandboxLifecycle resolves them).
	IdleTimeout *string `hcl:"idle_timeout,optional"`
	MaxLifetime *string `hcl:"max_lifetime,optional"`
	// OnIdle is what happens to a session idle for IdleTimeout: "close"
	// (nil: the default) or "pause" (SessionLifecycle.OnIdle).
	OnIdle *string        `hcl:"on_idle,optional"`
	Config *BackendConfig `hcl:"config,block"`
	// Network is the `network {}` block: what the sandbox's sessions may
	// reach through the backend's egress proxy (config_network.go). nil:
	// no network at all.
	Network *NetworkConfig `hcl:"network,block"`
	// Promotion is a promotion block at the sandbox level, its old place:
	// refused with a diagnostic that says to move it into config (library.go).
	Promotion *LegacyPromotion `hcl:"promotion,block"`

	DefRange    hcl.Range `hcl:",def_range"`
	PluginRange hcl.Range `hcl:"plugin,attr_value_range"`
	PolicyRange hcl.Range `hcl:"policy,attr_value_range"`
	// IdleTimeoutRange and MaxLifetimeRange locate the lifecycle
	// attributes for diagnostics.
	IdleTimeoutRange hcl.Range `hcl:"idle_timeout,attr_value_range"`
	MaxLifetimeRange hcl.Range `hcl:"max_lifetime,attr_value_range"`
	OnIdleRange      hcl.Range `hcl:"on_idle,attr_value_range"`
}

// BackendConfig is a sandbox's `config {}` block. Its body is kept as is and
// decoded later against the schema the plugin advertises in Info.
type BackendConfig struct {
	Body     hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

// Policy is a resolved policy: every limit has a value.
type Policy struct {
	Name            string
	AllowedImports  []string
	AllowedPackages []string
	Timeout         time.Duration
	MemoryMB        int
	MaxOutputBytes  int
	MaxCodeBytes    int
	MaxArgsBytes    int

	// AllowDangerousImports: dangerous modules the operator acknowledged
	// (allow_dangerous_imports); see Policy.UnacknowledgedDangerous.
	AllowDangerousImports []string
	// AllowUnreviewedImports: modules without a reviewed surface the
	// operator acknowledged (allow_unreviewed_imports).
	AllowUnreviewedImports []string
	// Network: the sandbox has a network {} block, which acknowledges the
	// dangerous modules the runner serves through its egress proxy
	// (rules.json egress_modules: urllib.request, urllib.error).
	Network bool

	// MaxTimeout, MaxMemoryMB and MaxOutputCeiling are the most a caller
	// may ask for (the policy's `ceiling {}`; by default the values above).
	MaxTimeout       time.Duration
	MaxMemoryMB      int
	MaxOutputCeiling int

	// MaxConcurrency is how many executions of one sandbox run at once;
	// MaxQueue how many callers may wait for a slot.
	MaxConcurrency int
	MaxQueue       int

	// Classes is the sandbox's `classes` (SandboxPolicy fills it in): the
	// validator accepts class statements.
	Classes bool
}

// limits are the policy's limits as shared.Prepare resolves a request
// with them: its values the defaults, its ceiling {} the ceilings (a
// ceiling it leaves unset is the value itself), named after the policy so
// that a refusal points at the attribute to raise.
func (p Policy) limits() shared.Defaults {
	or := func(c, v int) int {
		if c > 0 {
			return c
		}
		return v
	}
	maxT := p.MaxTimeout
	if maxT <= 0 {
		maxT = p.Timeout
	}
	return shared.Defaults{
		Name:    fmt.Sprintf("policy %q", p.Name),
		Timeout: p.Timeout, MemoryMB: p.MemoryMB, MaxOutputBytes: p.MaxOutputBytes,
		MaxCodeBytes: p.MaxCodeBytes, MaxArgsBytes: p.MaxArgsBytes,
		Ceiling: shared.Ceiling{Timeout: maxT, MemoryMB: or(p.MaxMemoryMB, p.MemoryMB), MaxOutputBytes: or(p.MaxOutputCeiling, p.MaxOutputBytes)},
	}
}

// DefaultMaxConcurrency is a sandbox's max_concurrency when its policy sets
// none: enough to keep the machine's cores busy, few enough that a burst of
// callers cannot exhaust the process table.
func DefaultMaxConcurrency() int { return max(4, 2*runtime.NumCPU()) }

// DefaultMaxQueue is max_queue when the policy sets none.
const DefaultMaxQueue = 256

// BuiltinPolicy is the policy of a sandbox that names none when the config
// has no policy "default": default-deny imports and the contract's default
// limits (shared.DefaultTimeout and the rest), which are also what a
// policy's limit left out becomes.
func BuiltinPolicy() Policy {
	return Policy{
		Name:           "default",
		Timeout:        shared.DefaultTimeout,
		MemoryMB:       shared.DefaultMemoryMB,
		MaxOutputBytes: shared.DefaultMaxOutputBytes,
		MaxCodeBytes:   shared.DefaultMaxCodeBytes,
		MaxArgsBytes:   shared.DefaultMaxArgsBytes,
		MaxConcurrency: DefaultMaxConcurrency(),
		MaxQueue:       DefaultMaxQueue,

		MaxTimeout:       shared.DefaultTimeout,
		MaxMemoryMB:      shared.DefaultMemoryMB,
		MaxOutputCeiling: shared.DefaultMaxOutputBytes,
	}
}

// ParseConfig parses and checks a policy from memory. filename is used in
// diagnostics; relative paths in the policy resolve against its directory.
func ParseConfig(filename string, src []byte) (*Config, hcl.Diagnostics) {
	p := hclparse.NewParser()
	f, diags := p.ParseHCL(src, filename)
	dir := filepath.Dir(filename)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return decodeConfig(p, f, diags, filename, dir)
}

// LoadConfigFile reads, parses and checks the policy file at path.
func LoadConfigFile(path string) (*Config, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return &Config{Filename: path, Files: map[string]*hcl.File{}}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read policy file",
			Detail:   err.Error(),
		}}
	}
	return ParseConfig(path, src)
}

// DefaultConfig returns the embedded default policy: a sandbox "subprocess"
// on the tier-1 subprocess plugin (found next to the executable),
// default-deny imports, a 5s timeout and 128 MiB of memory.
func DefaultConfig() *Config {
	p := hclparse.NewParser()
	f, diags := p.ParseHCL(defaultHCL, EmbeddedConfigName)
	wd, _ := os.Getwd()
	cfg, diags := decodeConfig(p, f, diags, EmbeddedConfigName, wd)
	if diags.HasErrors() {
		panic("host: embedded default.hcl is invalid: " + diags.Error())
	}
	cfg.Embedded = true
	return cfg
}

// ResolveConfigPath applies the lookup rule of LoadFile and the CLI: an
// explicit path is used as is; "" means DefaultConfigFile in the working
// directory if it exists, else the embedded default (returned as "").
func ResolveConfigPath(path string) string {
	if path != "" {
		return path
	}
	if st, err := os.Stat(DefaultConfigFile); err == nil && !st.IsDir() {
		return DefaultConfigFile
	}
	return ""
}

func decodeConfig(p *hclparse.Parser, f *hcl.File, diags hcl.Diagnostics, filename, dir string) (*Config, hcl.Diagnostics) {
	cfg := &Config{Filename: filename, Dir: dir, Files: p.Files()}
	if diags.HasErrors() || f == nil {
		return cfg, diags
	}
	diags = append(diags, gohcl.DecodeBody(f.Body, nil, cfg)...)
	// Decoding replaced the struct's fields; restore ours.
	cfg.Filename, cfg.Dir, cfg.Files = filename, dir, p.Files()
	cfg.fileRng = hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos}
	if diags.HasErrors() {
		return cfg, diags
	}
	diags = append(diags, cfg.check()...)
	return cfg, diags
}

var (
	pluginNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]*$`)
	nameRe       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	sha256Re     = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
)

func errDiag(rng hcl.Range, summary, detail string) *hcl.Diagnostic {
	r := rng
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: &r}
}

// check runs the semantic checks that need no plugin.
func (c *Config) check() hcl.Diagnostics {
	var diags hcl.Diagnostics

	seenPlugin := map[string]*PluginConfig{}
	for _, p := range c.Plugins {
		if !pluginNameRe.MatchString(p.Name) {
			diags = append(diags, errDiag(p.DefRange, "Invalid plugin name",
				fmt.Sprintf("Plugin name %q must be lower-case letters, digits, '.', '_' or '-'; the binary is named %s<name>.", p.Name, plugin.PluginPrefix)))
		}
		if prev, ok := seenPlugin[p.Name]; ok {
			diags = append(diags, errDiag(p.DefRange, "Duplicate plugin block",
				fmt.Sprintf("Plugin %q was already declared at %s.", p.Name, prev.DefRange)))
			continue
		}
		seenPlugin[p.Name] = p
		if p.SHA256 != "" && !sha256Re.MatchString(p.SHA256) {
			diags = append(diags, errDiag(p.SHA256Range, "Invalid sha256",
				"The sha256 attribute must be 64 hexadecimal digits (the output of `sha256sum`)."))
		}
	}

	c.policies = map[string]Policy{}
	seenPolicy := map[string]*PolicyConfig{}
	for _, p := range c.Policies {
		if !nameRe.MatchString(p.Name) {
			diags = append(diags, errDiag(p.DefRange, "Invalid policy name",
				fmt.Sprintf("Policy name %q must start with a letter or '_' and contain only letters, digits, '_' or '-'.", p.Name)))
		}
		if prev, ok := seenPolicy[p.Name]; ok {
			diags = append(diags, errDiag(p.DefRange, "Duplicate policy block",
				fmt.Sprintf("Policy %q was already declared at %s.", p.Name, prev.DefRange)))
			continue
		}
		seenPolicy[p.Name] = p
		pol, d := p.resolve()
		diags = append(diags, d...)
		c.policies[p.Name] = pol
	}

	seenSandbox := map[string]*SandboxConfig{}
	for _, s := range c.Sandboxes {
		if !nameRe.MatchString(s.Name) {
			diags = append(diags, errDiag(s.DefRange, "Invalid sandbox name",
				fmt.Sprintf("Sandbox name %q must start with a letter or '_' and contain only letters, digits, '_' or '-'.", s.Name)))
		}
		if prev, ok := seenSandbox[s.Name]; ok {
			diags = append(diags, errDiag(s.DefRange, "Duplicate sandbox block",
				fmt.Sprintf("Sandbox %q was already declared at %s.", s.Name, prev.DefRange)))
			continue
		}
		seenSandbox[s.Name] = s
		diags = append(diags, s.Promotion.check(s.Name)...) // library.go
		diags = append(diags, s.Network.check(s.Name)...)   // config_network.go
		_, d := s.lifecycle()                               // sessionconfig.go
		diags = append(diags, d...)
		if !pluginNameRe.MatchString(s.Plugin) {
			diags = append(diags, errDiag(s.PluginRange, "Invalid plugin name",
				fmt.Sprintf("Plugin name %q must be lower-case letters, digits, '.', '_' or '-'.", s.Plugin)))
		}
		if s.Policy != "" {
			if _, ok := seenPolicy[s.Policy]; !ok {
				diags = append(diags, errDiag(s.PolicyRange, "Unknown policy",
					fmt.Sprintf("Sandbox %q refers to policy %q, which is not declared.%s", s.Name, s.Policy, declaredList("policies", keys(seenPolicy)))))
			}
		}
	}

	_, d := c.Sessions.limits() // sessionconfig.go
	diags = append(diags, d...)

	if len(c.Sandboxes) == 0 {
		diags = append(diags, errDiag(c.fileRng, "No sandbox declared",
			`A policy file must declare at least one sandbox block, e.g. sandbox "subprocess" { plugin = "subprocess" }.`))
	}
	if c.DefaultSandbox != "" {
		if _, ok := seenSandbox[c.DefaultSandbox]; !ok {
			diags = append(diags, errDiag(c.DefaultSandboxRange, "Unknown default sandbox",
				fmt.Sprintf("default_sandbox names %q, which is not declared.%s", c.DefaultSandbox, declaredList("sandboxes", keys(seenSandbox)))))
		}
	}
	return diags
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func declaredList(what string, names []string) string {
	if len(names) == 0 {
		return fmt.Sprintf(" No %s are declared.", what)
	}
	sort.Strings(names)
	return fmt.Sprintf(" Declared %s: %s.", what, strings.Join(names, ", "))
}

func (p *PolicyConfig) resolve() (Policy, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	pol := BuiltinPolicy()
	pol.Name = p.Name
	pol.AllowedImports = append([]string(nil), p.AllowedImports...)
	pol.AllowedPackages = append([]string(nil), p.AllowedPackages...)
	pol.AllowDangerousImports = append([]string(nil), p.AllowDangerousImports...)
	pol.AllowUnreviewedImports = append([]string(nil), p.AllowUnreviewedImports...)
	diags = append(diags, checkAllowedPackages(p)...) // dependencies.go
	for _, m := range p.AllowedImports {
		if m == "" || strings.ContainsAny(m, " \t/\\") {
			diags = append(diags, errDiag(p.AllowedImportsRange, "Invalid module name",
				fmt.Sprintf("allowed_imports entry %q is not a Python module name.", m)))
		}
	}
	if p.Timeout != nil {
		d, err := time.ParseDuration(*p.Timeout)
		switch {
		case err != nil:
			diags = append(diags, errDiag(p.TimeoutRange, "Invalid duration",
				fmt.Sprintf("timeout %q is not a duration such as \"500ms\", \"5s\" or \"1m\": %v.", *p.Timeout, err)))
		case d <= 0:
			diags = append(diags, errDiag(p.TimeoutRange, "Invalid timeout",
				fmt.Sprintf("timeout must be positive, not %q.", *p.Timeout)))
		case d > shared.MaxTimeout:
			diags = append(diags, errDiag(p.TimeoutRange, "Timeout too long", timeoutTooLong("timeout", d)))
		default:
			pol.Timeout = d
		}
	}
	for _, l := range []struct {
		name string
		v    *int
		rng  hcl.Range
		dst  *int
	}{
		{"memory_mb", p.MemoryMB, p.MemoryMBRange, &pol.MemoryMB},
		{"max_output_bytes", p.MaxOutputBytes, p.MaxOutputBytesRange, &pol.MaxOutputBytes},
		{"max_code_bytes", p.MaxCodeBytes, p.MaxCodeBytesRange, &pol.MaxCodeBytes},
		{"max_args_bytes", p.MaxArgsBytes, p.MaxArgsBytesRange, &pol.MaxArgsBytes},
	} {
		if !positiveLimit(&diags, l.name, l.v, l.rng, "a positive number") {
			continue
		}
		if l.name == "memory_mb" && *l.v < shared.MinMemoryMB {
			diags = append(diags, errDiag(l.rng, "Memory limit below the floor",
				fmt.Sprintf("memory_mb = %d: a Python child needs at least %d MB to start, and a limit below what it already maps would not hold.", *l.v, shared.MinMemoryMB)))
			continue
		}
		if l.name == "memory_mb" && *l.v > shared.MaxMemoryMB {
			diags = append(diags, errDiag(l.rng, "Memory limit too large", memoryTooLarge(*l.v)))
			continue
		}
		*l.dst = *l.v
	}
	for _, l := range []struct {
		name string
		v    *int
		rng  hcl.Range
		dst  *int
	}{
		{"max_concurrency", p.MaxConcurrency, p.MaxConcurrencyRange, &pol.MaxConcurrency},
		{"max_queue", p.MaxQueue, p.MaxQueueRange, &pol.MaxQueue},
	} {
		if l.v == nil {
			continue
		}
		if *l.v <= 0 && !(l.name == "max_queue" && *l.v == 0) {
			diags = append(diags, errDiag(l.rng, "Invalid limit",
				fmt.Sprintf("%s must be a positive number, not %d.", l.name, *l.v)))
			continue
		}
		*l.dst = *l.v
	}
	pol.MaxTimeout, pol.MaxMemoryMB, pol.MaxOutputCeiling = pol.Timeout, pol.MemoryMB, pol.MaxOutputBytes
	if c := p.Ceiling; c != nil {
		if c.Timeout != nil {
			d, err := time.ParseDuration(*c.Timeout)
			switch {
			case err != nil:
				diags = append(diags, errDiag(c.TimeoutRange, "Invalid duration",
					fmt.Sprintf("ceiling timeout %q is not a duration such as \"30s\" or \"2m\": %v.", *c.Timeout, err)))
			case d < pol.Timeout:
				diags = append(diags, errDiag(c.TimeoutRange, "Ceiling below the policy",
					fmt.Sprintf("ceiling timeout %s is below the policy's timeout %s.", d, pol.Timeout)))
			case d > shared.MaxTimeout:
				diags = append(diags, errDiag(c.TimeoutRange, "Timeout too long", timeoutTooLong("ceiling timeout", d)))
			default:
				pol.MaxTimeout = d
			}
		}
		for _, l := range []struct {
			name   string
			v      *int
			rng    hcl.Range
			policy int
			dst    *int
		}{
			{"memory_mb", c.MemoryMB, c.MemoryMBRange, pol.MemoryMB, &pol.MaxMemoryMB},
			{"max_output_bytes", c.MaxOutputBytes, c.MaxOutputBytesRange, pol.MaxOutputBytes, &pol.MaxOutputCeiling},
		} {
			if l.v == nil {
				continue
			}
			if *l.v < l.policy {
				diags = append(diags, errDiag(l.rng, "Ceiling below the policy",
					fmt.Sprintf("ceiling %s %d is below the policy's %s %d.", l.name, *l.v, l.name, l.policy)))
				continue
			}
			if l.name == "memory_mb" && *l.v > shared.MaxMemoryMB {
				diags = append(diags, errDiag(l.rng, "Memory limit too large", "ceiling "+memoryTooLarge(*l.v)))
				continue
			}
			*l.dst = *l.v
		}
	}
	return pol, diags
}

// memoryTooLarge is the detail of a memory_mb above shared.MaxMemoryMB.
func memoryTooLarge(mb int) string {
	return fmt.Sprintf("memory_mb = %d is above the largest limit, %d MB (2 PiB): a tier would hold it wrapped around, as another limit.", mb, shared.MaxMemoryMB)
}

// timeoutTooLong is the detail of a timeout above shared.MaxTimeout.
func timeoutTooLong(what string, d time.Duration) string {
	return fmt.Sprintf("%s %s is above the longest, %s (about 68 years): its CPU limit in seconds would not fit the fork-server's, which would hold it wrapped around, as another limit.", what, d, shared.MaxTimeout)
}

// Policy returns the resolved policy called name.
func (c *Config) Policy(name string) (Policy, bool) {
	p, ok := c.policies[name]
	return p, ok
}

// SandboxPolicy returns the policy that applies to sandbox s: the one it
// names, else policy "default" if declared, else BuiltinPolicy.
func (c *Config) SandboxPolicy(s *SandboxConfig) Policy {
	name := s.Policy
	if name == "" {
		name = "default"
	}
	p, ok := c.policies[name]
	if !ok {
		p = BuiltinPolicy()
	}
	p.Classes = true
	if s.Classes != nil {
		p.Classes = *s.Classes
	}
	p.Network = c.SandboxEgress(s) != nil
	return p
}

// DefaultSandboxName returns default_sandbox, or the only (first) sandbox.
func (c *Config) DefaultSandboxName() string {
	if c.DefaultSandbox != "" {
		return c.DefaultSandbox
	}
	if len(c.Sandboxes) > 0 {
		return c.Sandboxes[0].Name
	}
	return ""
}

// SandboxConfigNamed returns the sandbox block called name.
func (c *Config) SandboxConfigNamed(name string) (*SandboxConfig, bool) {
	for _, s := range c.Sandboxes {
		if s.Name == name {
			return s, true
		}
	}
	return nil, false
}

func (c *Config) pluginConfig(name string) *PluginConfig {
	for _, p := range c.Plugins {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (c *Config) resolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir, p)
}

// DiagnosticsError is returned by Load, LoadFile and the Sandbox calls when
// the policy is wrong. It carries the HCL diagnostics and the parsed files so
// that they can be printed with source snippets.
type DiagnosticsError struct {
	Diagnostics hcl.Diagnostics
	Files       map[string]*hcl.File
}

// Error lists the error diagnostics as "file:line:col: summary: detail".
func (e *DiagnosticsError) Error() string {
	var parts []string
	for _, d := range e.Diagnostics {
		if d.Severity != hcl.DiagError {
			continue
		}
		parts = append(parts, diagHeadline(d))
	}
	if len(parts) == 0 {
		return "invalid policy"
	}
	return strings.Join(parts, "; ")
}

// WriteText renders the diagnostics with WriteDiagnostics.
func (e *DiagnosticsError) WriteText(w io.Writer) error {
	return WriteDiagnostics(w, e.Files, e.Diagnostics)
}

func diagHeadline(d *hcl.Diagnostic) string {
	s := d.Summary
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	if d.Subject != nil {
		return fmt.Sprintf("%s:%d:%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, s)
	}
	return s
}

// WriteDiagnostics prints diags for a terminal: each starts with a
// compiler-style "file:line:col: Error: summary" line (so editors and scripts
// can jump to it), followed by hcl.NewDiagnosticTextWriter's source snippet
// and detail.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	for _, d := range diags {
		var buf bytes.Buffer
		tw := hcl.NewDiagnosticTextWriter(&buf, files, 0, false)
		if err := tw.WriteDiagnostic(d); err != nil {
			return err
		}
		out := buf.String()
		sev := "Error"
		if d.Severity == hcl.DiagWarning {
			sev = "Warning"
		}
		if d.Subject != nil {
			// Replace the writer's "Error: summary" headline with one that
			// carries file:line:col.
			if i := strings.IndexByte(out, '\n'); i >= 0 {
				out = out[i+1:]
			}
			out = fmt.Sprintf("%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary) + out
		}
		if _, err := io.WriteString(w, out); err != nil {
			return err
		}
	}
	return nil
}

func validSHA256(s string) bool { return sha256Re.MatchString(s) }

func normalizeSHA256(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		return strings.ToLower(s)
	}
	return hex.EncodeToString(b)
}

// Allowed returns the import allowlist of a call under the policy: its
// allowed_imports together with extra, sorted and without duplicates.
// Requests can only add modules to what the policy allows.
func (p Policy) Allowed(extra ...string) []string {
	set := map[string]bool{}
	for _, m := range p.AllowedImports {
		set[m] = true
	}
	for _, m := range extra {
		if m = strings.TrimSpace(m); m != "" {
			set[m] = true
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// positiveLimit reports whether the optional limit v of attribute name is
// set and positive; a value of 0 or less adds an "Invalid limit" diagnostic
// at rng saying it must be what (e.g. "a positive number").
func positiveLimit(diags *hcl.Diagnostics, name string, v *int, rng hcl.Range, what string) bool {
	if v == nil {
		return false
	}
	if *v <= 0 {
		*diags = append(*diags, errDiag(rng, "Invalid limit", fmt.Sprintf("%s must be %s, not %d.", name, what, *v)))
		return false
	}
	return true
}

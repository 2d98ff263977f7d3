package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"text/tabwriter"

	"github.com/hashicorp/hcl/v2"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared"
)

// pluginReport is one row of `plugins list|check`.
type pluginReport struct {
	host.PluginEntry
	Tier         *int                `json:"tier,omitempty"`
	Version      string              `json:"version,omitempty"`
	APIVersions  []int               `json:"api_versions,omitempty"`
	Capabilities []shared.Capability `json:"capabilities,omitempty"`
	Description  string              `json:"description,omitempty"`
	Error        string              `json:"error,omitempty"`
}

func cmdPlugins(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && args[0] != "-h" && args[0] != "--help" && args[0] != "-help" {
		fmt.Fprintln(e.stderr, "Usage: orqest-sandbox plugins list|check [--config F] [--json] [--no-launch]")
		return exitError
	}
	sub := args[0]
	if sub == "-h" || sub == "--help" || sub == "-help" {
		fmt.Fprintln(e.stdout, "Usage: orqest-sandbox plugins list|check [--config F] [--json] [--no-launch]")
		return exitOK
	}
	if sub != "list" && sub != "check" {
		fmt.Fprintf(e.stderr, "orqest-sandbox plugins: unknown subcommand %q (want list or check)\n", sub)
		return exitError
	}
	fs := newFlagSet(e, "plugins "+sub, "plugins "+sub+" [--config F] [--json]"+map[bool]string{true: " [--no-launch]"}[sub == "list"])
	var config string
	var asJSON, noLaunch bool
	fs.StringVar(&config, "config", "", "policy file (default ./config.hcl, else the embedded default)")
	fs.BoolVar(&asJSON, "json", false, `print {"plugins": [...]}`)
	if sub == "list" {
		fs.BoolVar(&noLaunch, "no-launch", false, "do not launch plugins to ask their version and tier")
	}
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	if len(pos) > 0 {
		fmt.Fprintf(e.stderr, "orqest-sandbox plugins %s: unexpected arguments %q\n", sub, pos)
		return exitError
	}
	h, err := host.LoadFile(ctx, config)
	if err != nil {
		return reportErr(e, err)
	}
	defer h.Close()

	var reports []pluginReport
	failed := 0
	for _, p := range h.Catalog().List() {
		r := pluginReport{PluginEntry: p}
		if p.ExpectedSHA256 != "" && p.SHA256 != p.ExpectedSHA256 {
			r.Error = fmt.Sprintf("sha256 %s does not match the policy's %s", p.SHA256, p.ExpectedSHA256)
		} else if !noLaunch {
			info, err := h.ProbePlugin(ctx, p.Name)
			if err != nil {
				r.Error = err.Error()
			} else {
				tier := info.Tier
				r.Tier, r.Version, r.APIVersions, r.Capabilities, r.Description = &tier, info.Version, info.APIVersions, info.Capabilities, info.Description
			}
		}
		if r.Error != "" {
			failed++
		}
		reports = append(reports, r)
	}

	if asJSON {
		if reports == nil {
			reports = []pluginReport{}
		}
		b, _ := json.Marshal(map[string]any{"plugins": reports})
		fmt.Fprintf(e.stdout, "%s\n", b)
	} else if sub == "list" {
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tTIER\tVERSION\tSOURCE\tSHA256\tPATH")
		for _, r := range reports {
			tier, ver := "-", "-"
			if r.Tier != nil {
				tier, ver = fmt.Sprint(*r.Tier), r.Version
			}
			if r.Error != "" {
				ver = "error"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, tier, ver, r.Source, r.SHA256, r.Path)
		}
		tw.Flush()
		for _, r := range reports {
			if r.Error != "" {
				fmt.Fprintf(e.stderr, "plugin %s: %s\n", r.Name, r.Error)
			}
		}
		if len(reports) == 0 {
			fmt.Fprintf(e.stderr, "no plugins found in %s\n", strings.Join(h.Catalog().SearchDirs(), ", "))
		}
	} else {
		for _, r := range reports {
			if r.Error != "" {
				fmt.Fprintf(e.stdout, "FAIL  %s  %s\n      %s\n", r.Name, r.Path, r.Error)
				continue
			}
			fmt.Fprintf(e.stdout, "ok    %s  tier %d  %s  api %v  %s\n", r.Name, *r.Tier, r.Version, r.APIVersions, r.Path)
		}
	}
	if sub == "check" && (failed > 0 || len(reports) == 0) {
		return exitError
	}
	return exitOK
}

// policyReport is `policy check --json`'s output.
type policyReport struct {
	File        string           `json:"file"`
	OK          bool             `json:"ok"`
	Sandboxes   []string         `json:"sandboxes"`
	Policies    int              `json:"policies"`
	Diagnostics []diagnosticJSON `json:"diagnostics"`
	// Errors are failures that are not about a place in the policy (a
	// plugin that would not start).
	Errors []string `json:"errors,omitempty"`
	// Sessions are the session limits in force, host-wide and per
	// sandbox (defaults filled in).
	Sessions *sessionsReport `json:"sessions,omitempty"`
	// Network is what each sandbox's network {} block lets its sessions
	// reach (networkreport.go); a sandbox without one has no network.
	Network map[string]networkReport `json:"network,omitempty"`
}

// sessionsReport is the effective session policy of `policy check`.
type sessionsReport struct {
	MaxSessions        int                        `json:"max_sessions"`
	MaxSessionsPerUser int                        `json:"max_sessions_per_user"`
	ReclaimIdleAfter   string                     `json:"reclaim_idle_after"`
	Sandboxes          map[string]lifecycleReport `json:"sandboxes"`
}

// lifecycleReport is one sandbox's session lifecycle; Sessions says
// whether its plugin has sessions at all (else the values do not apply).
type lifecycleReport struct {
	Sessions    bool   `json:"sessions"`
	IdleTimeout string `json:"idle_timeout"`
	MaxLifetime string `json:"max_lifetime"`
	OnIdle      string `json:"on_idle"`
}

// diagnosticJSON is an HCL diagnostic for a program: severity "error" or
// "warning", and where it points when it points somewhere.
type diagnosticJSON struct {
	Severity string     `json:"severity"`
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail,omitempty"`
	Range    *rangeJSON `json:"range,omitempty"`
}

// rangeJSON is where a diagnostic points: lines and columns from 1.
type rangeJSON struct {
	Filename string  `json:"filename"`
	Start    posJSON `json:"start"`
	End      posJSON `json:"end"`
}

type posJSON struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

func diagnosticsJSON(diags hcl.Diagnostics) []diagnosticJSON {
	out := []diagnosticJSON{}
	for _, d := range diags {
		j := diagnosticJSON{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if r := d.Subject; r != nil {
			j.Range = &rangeJSON{r.Filename, posJSON{r.Start.Line, r.Start.Column}, posJSON{r.End.Line, r.End.Column}}
		}
		if d.Severity == hcl.DiagWarning {
			j.Severity = "warning"
		}
		out = append(out, j)
	}
	return out
}

func cmdPolicy(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(e.stderr, "Usage: orqest-sandbox policy check [--config F] [--json] [F]")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return exitOK
		}
		return exitError
	}
	fs := newFlagSet(e, "policy check", "policy check [--json] [F]")
	var config string
	var asJSON bool
	fs.StringVar(&config, "config", "", "policy file (the same as F)")
	fs.BoolVar(&asJSON, "json", false, "print the verdict and every diagnostic as one JSON object")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	switch {
	case len(pos) > 1 || (len(pos) == 1 && config != ""):
		fmt.Fprintln(e.stderr, "orqest-sandbox policy check: give one policy file")
		return exitError
	case len(pos) == 1:
		config = pos[0]
	}
	rep := policyReport{File: host.ResolveConfigPath(config), Sandboxes: []string{}, Diagnostics: []diagnosticJSON{}}
	if rep.File == "" {
		rep.File = host.EmbeddedConfigName
	}
	var diags hcl.Diagnostics
	var files map[string]*hcl.File
	var others []error
	check := func() {
		cfg, err := host.ReadConfig(config)
		if err != nil {
			others = append(others, err)
			return
		}
		rep.File, files = cfg.Filename, cfg.Files
		rep.Policies = len(cfg.Policies)
		rep.Network = networkReports(cfg) // networkreport.go
		diags = append(diags, host.LintPolicy(cfg)...)
		h, err := host.Load(ctx, cfg)
		if err != nil {
			others = append(others, err)
			return
		}
		defer h.Close()
		rep.Sandboxes = h.SandboxNames()
		// Launch every sandbox's plugin: its config block is checked
		// against the schema the plugin advertises, and the plugin must
		// accept it. One that did not start is not asked again below.
		started := map[string]bool{}
		for _, name := range rep.Sandboxes {
			sb, err := h.Sandbox(ctx, name)
			if err == nil {
				err = sb.Start(ctx)
			}
			if err != nil {
				others = append(others, err)
				continue
			}
			started[name] = true
		}
		lim := cfg.SessionLimits()
		rep.Sessions = &sessionsReport{MaxSessions: lim.MaxSessions, MaxSessionsPerUser: lim.MaxSessionsPerUser,
			ReclaimIdleAfter: lim.ReclaimIdleAfter.String(), Sandboxes: map[string]lifecycleReport{}}
		for _, name := range rep.Sandboxes {
			sb, err := h.Sandbox(ctx, name)
			if err != nil {
				continue
			}
			lc := sb.Lifecycle()
			sessions := false
			if started[name] {
				info, err := sb.Info(ctx)
				sessions = err == nil && info.Has(shared.CapSessions)
			}
			rep.Sessions.Sandboxes[name] = lifecycleReport{Sessions: sessions,
				IdleTimeout: lc.IdleTimeout.String(), MaxLifetime: lc.MaxLifetime.String(), OnIdle: lc.OnIdle}
		}
	}
	check()
	for _, err := range others {
		var de *host.DiagnosticsError
		if errors.As(err, &de) {
			diags = append(diags, de.Diagnostics...)
			if files == nil {
				files = de.Files
			}
			continue
		}
		rep.Errors = append(rep.Errors, err.Error())
	}
	rep.OK = !diags.HasErrors() && len(rep.Errors) == 0
	rep.Diagnostics = diagnosticsJSON(diags)
	code := exitOK
	if !rep.OK {
		code = exitError
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(e.stdout, "%s\n", b)
		return code
	}
	host.WriteDiagnostics(e.stderr, files, diags)
	for _, msg := range rep.Errors {
		fmt.Fprintf(e.stderr, "orqest-sandbox: %s\n", msg)
	}
	if !rep.OK {
		fmt.Fprintf(e.stderr, "%s: not usable as written (%d %s)\n", rep.File, countErrors(diags)+len(rep.Errors), plural(countErrors(diags)+len(rep.Errors), "error", "errors"))
		return code
	}
	warnings := len(diags)
	fmt.Fprintf(e.stdout, "%s: ok (%d %s: %s; %d %s; %d %s)\n", rep.File,
		len(rep.Sandboxes), plural(len(rep.Sandboxes), "sandbox", "sandboxes"), strings.Join(rep.Sandboxes, ", "),
		rep.Policies, plural(rep.Policies, "policy", "policies"),
		warnings, plural(warnings, "warning", "warnings"))
	if ss := rep.Sessions; ss != nil {
		fmt.Fprintf(e.stdout, "sessions: max_sessions %d, max_sessions_per_user %d, reclaim_idle_after %s\n",
			ss.MaxSessions, ss.MaxSessionsPerUser, ss.ReclaimIdleAfter)
		for _, name := range rep.Sandboxes {
			lc, ok := ss.Sandboxes[name]
			switch {
			case !ok:
			case lc.Sessions:
				onIdle := ""
				if lc.OnIdle == host.OnIdlePause {
					onIdle = ", on_idle pause"
				}
				fmt.Fprintf(e.stdout, "  sandbox %s: idle_timeout %s, max_lifetime %s%s\n", name, lc.IdleTimeout, lc.MaxLifetime, onIdle)
			default:
				fmt.Fprintf(e.stdout, "  sandbox %s: no sessions (idle_timeout %s, max_lifetime %s do not apply)\n", name, lc.IdleTimeout, lc.MaxLifetime)
			}
		}
	}
	writeNetworkReport(e.stdout, rep.Sandboxes, rep.Network)
	return code
}

func countErrors(diags hcl.Diagnostics) int {
	n := 0
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			n++
		}
	}
	return n
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func cmdVersion(_ context.Context, e *env, args []string) int {
	fmt.Fprintf(e.stdout, "orqest-sandbox %s (plugin API %d, %s %s/%s)\n", version, shared.APIVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}

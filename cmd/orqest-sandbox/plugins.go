package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"text/tabwriter"

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

func cmdPolicy(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(e.stderr, "Usage: orqest-sandbox policy check [--config F] [--json] [F]")
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return exitOK
		}
		return exitError
	}
	fs := newFlagSet(e, "policy check", "policy check [F]")
	var config string
	fs.StringVar(&config, "config", "", "policy file (the same as F)")
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
	cfg, err := host.ReadConfig(config)
	if err != nil {
		return reportErr(e, err)
	}
	h, err := host.Load(ctx, cfg)
	if err != nil {
		return reportErr(e, err)
	}
	defer h.Close()
	// Launch every sandbox's plugin: its config block is checked against
	// the schema the plugin advertises, and the plugin must accept it.
	startErr := h.StartAll(ctx)
	warnings := host.PolicyWarnings(cfg)
	host.WriteDiagnostics(e.stderr, cfg.Files, warnings)
	if startErr != nil {
		var de *host.DiagnosticsError
		if errors.As(startErr, &de) {
			de.WriteText(e.stderr)
		}
		for _, err := range unjoin(startErr) {
			if !errors.As(err, &de) {
				fmt.Fprintf(e.stderr, "orqest-sandbox: %v\n", err)
			}
		}
		return exitError
	}
	name := cfg.Filename
	fmt.Fprintf(e.stdout, "%s: ok (%d %s: %s; %d %s; %d %s)\n", name,
		len(cfg.Sandboxes), plural(len(cfg.Sandboxes), "sandbox", "sandboxes"), strings.Join(h.SandboxNames(), ", "),
		len(cfg.Policies), plural(len(cfg.Policies), "policy", "policies"),
		len(warnings), plural(len(warnings), "warning", "warnings"))
	return exitOK
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
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

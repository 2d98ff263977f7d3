// Command dynamic_tools is the runnable demo of dynamic tools, end to end:
//
//  1. One GeneratedToolSpec (extract_dois, a DOI extractor) spawned and
//     executed on every tier whose plugin is in bin/: tier 0 (inprocess, with
//     unsafe = true), tier 1 (subprocess), tier 2 (docker, where an engine
//     is reachable) — the same spec, the same answer. Bad arguments and a
//     rejected implementation show the errors, and the event bus prints the
//     events as they happen (they also land in a JSON-lines audit log).
//  2. A scripted agent (no LLM) connects to `bin/orqest-sandbox mcp serve`
//     over stdio with the official MCP Go SDK, finds no tool for its task,
//     spawns one, is told the tool list changed, and calls the new tool.
//
// Run it from the repository root after `make build`:
//
//	make build && go run ./examples/dynamic_tools
//	go run ./examples/dynamic_tools --bin /path/to/bin --skip-docker
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared/plugin"
)

// doiSpec is a DOI extractor, parameters in the shorthand form.
var doiSpec = host.GeneratedToolSpec{
	Name:        "extract_dois",
	Description: "Extract DOIs from a text blob.",
	Parameters:  map[string]any{"text": map[string]any{"type": "string"}},
	Implementation: "import re\n" +
		"return {'dois': re.findall(r'10\\.\\d{4,}/[\\w.\\-/]+', args['text'])}\n",
	AllowedImports: []string{"re"},
	Timeout:        2 * time.Second,
}

const sampleText = "Compare 10.1038/nphys1170 with 10.1103/PhysRevLett.116.061102 (the follow-up)."

// tiers are the sandboxes the demo tries, in tier order.
var tiers = []struct {
	name, plugin, extra string
	tier                int
}{
	{"tier0", "inprocess", "  unsafe = true   # tier 0 has no isolation: the operator must say so\n", 0},
	{"tier1", "subprocess", "", 1},
	{"tier2", "docker", "", 2},
}

func main() {
	bin := flag.String("bin", "bin", "directory holding orqest-sandbox and its plugins (`make build`)")
	skipDocker := flag.Bool("skip-docker", false, "do not try tier 2")
	skipAgent := flag.Bool("skip-agent", false, "do not run the MCP agent")
	flag.Parse()
	os.Exit(run(*bin, *skipDocker, *skipAgent))
}

func run(bin string, skipDocker, skipAgent bool) int {
	defer host.CleanupClients()
	ctx := context.Background()
	binDir, err := filepath.Abs(bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	work, err := os.MkdirTemp("", "orqest-dynamic-tools-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)

	// The policy: every tier whose plugin was built, an audit log, and the
	// one import the tool needs.
	var src strings.Builder
	fmt.Fprintf(&src, "plugin_dir = %q\naudit_log  = \"audit.jsonl\"\ndefault_sandbox = \"tier1\"\n\n", binDir)
	src.WriteString("policy \"default\" {\n  allowed_imports = [\"re\", \"json\", \"math\"]\n  timeout = \"5s\"\n}\n")
	var present []string
	for _, t := range tiers {
		if _, err := os.Stat(filepath.Join(binDir, plugin.PluginPrefix+t.plugin)); err != nil {
			fmt.Printf("tier %d (%s): skipped: %s%s not found in %s (run `make build`)\n", t.tier, t.plugin, plugin.PluginPrefix, t.plugin, binDir)
			continue
		}
		if t.plugin == "docker" && skipDocker {
			fmt.Printf("tier 2 (docker): skipped (--skip-docker)\n")
			continue
		}
		fmt.Fprintf(&src, "\nsandbox %q {\n  plugin = %q\n%s}\n", t.name, t.plugin, t.extra)
		present = append(present, t.name)
	}
	if !slices.Contains(present, "tier1") {
		fmt.Fprintf(os.Stderr, "the tier-1 plugin is missing from %s: run `make build` first\n", binDir)
		return 1
	}
	cfgPath := filepath.Join(work, "config.hcl")
	if err := os.WriteFile(cfgPath, []byte(src.String()), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	h, err := host.LoadFile(ctx, cfgPath)
	if err != nil {
		var de *host.DiagnosticsError
		if errors.As(err, &de) {
			de.WriteText(os.Stderr)
		} else {
			fmt.Fprintln(os.Stderr, err)
		}
		return 1
	}
	// Print the bus as it goes: what a host app would subscribe to.
	stopEvents := h.Bus().SubscribeFunc(256, func(ev host.Event) {
		p, _ := json.Marshal(ev.Payload)
		fmt.Printf("      · event %-28s %s\n", ev.Type, p)
	})

	section("1. One GeneratedToolSpec on every tier")
	fmt.Printf("spec %s: %s\n  parameters %v, allowed_imports %v\n  implementation:\n%s",
		doiSpec.Name, doiSpec.Description, doiSpec.Parameters, doiSpec.AllowedImports, indent(doiSpec.Implementation, "    | "))
	args := json.RawMessage(fmt.Sprintf(`{"text": %q}`, sampleText))
	fmt.Printf("  args: %s\n", args)
	var tier1 *host.ToolFactory
	for _, t := range tiers {
		if !slices.Contains(present, t.name) {
			continue
		}
		sb, _ := h.Sandbox(ctx, t.name)
		fmt.Printf("\ntier %d — sandbox %q (plugin %s)\n", t.tier, t.name, t.plugin)
		sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
		err := sb.Start(sctx)
		cancel()
		if err != nil {
			fmt.Printf("  skipped: %v\n", oneLine(err))
			continue
		}
		f := host.NewToolFactory(sb, h.Bus())
		if t.name == "tier1" {
			tier1 = f
		}
		tool, err := f.Spawn(ctx, doiSpec)
		time.Sleep(20 * time.Millisecond) // let the event line print first
		if err != nil {
			fmt.Printf("  spawn failed: %v\n", err)
			continue
		}
		res, err := tool.Call(ctx, args)
		time.Sleep(20 * time.Millisecond)
		switch {
		case err != nil:
			fmt.Printf("  call failed: %v\n", oneLine(err))
		case !res.Success:
			fmt.Printf("  call failed (%s): %s\n", res.ErrorKind, oneLine(errors.New(res.Error)))
		default:
			fmt.Printf("  → %s   (%.1f ms in the sandbox)\n", res.Output, res.DurationMS)
		}
	}

	if tier1 != nil {
		section("   What goes wrong, and how it is reported (tier 1)")
		tool, _ := tier1.Tool("extract_dois")
		_, err := tool.Call(ctx, json.RawMessage(`{"text": 42}`))
		time.Sleep(20 * time.Millisecond)
		fmt.Printf("  bad arguments        → %v\n", err)
		evil := doiSpec
		evil.Name = "read_secrets"
		evil.Implementation = "return open('/etc/shadow').read()"
		_, err = tier1.Spawn(ctx, evil)
		time.Sleep(20 * time.Millisecond)
		fmt.Printf("  rejected spec        → %v\n", err)
		greedy := doiSpec
		greedy.Name = "shell"
		greedy.AllowedImports = []string{"subprocess"}
		_, err = tier1.Spawn(ctx, greedy)
		time.Sleep(20 * time.Millisecond)
		fmt.Printf("  import beyond policy → %v\n", err)
	}
	stopEvents()
	h.Close() // flushes the audit log
	if b, err := os.ReadFile(filepath.Join(work, "audit.jsonl")); err == nil {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		fmt.Printf("\naudit log (audit_log = \"audit.jsonl\"): %d JSON lines, e.g.\n  %s\n", len(lines), lines[0])
	}

	if skipAgent {
		return 0
	}
	section("2. A scripted agent over MCP uses a tool it did not have")
	if err := agent(ctx, binDir, cfgPath); err != nil {
		fmt.Fprintf(os.Stderr, "agent: %v\n", err)
		return 1
	}
	return 0
}

// agent is a scripted (no-LLM) MCP client: it needs DOIs extracted, finds no
// such tool, spawns one, waits for tools/list_changed, and uses it.
func agent(ctx context.Context, binDir, cfgPath string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cli := filepath.Join(binDir, "orqest-sandbox")
	cmd := exec.Command(cli, "mcp", "serve", "--config", cfgPath, "--sandbox", "tier1")
	cmd.Stderr = os.Stderr
	changed := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "scripted-agent", Version: "1.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	say := func(who, format string, a ...any) { fmt.Printf("%-7s %s\n", who+":", fmt.Sprintf(format, a...)) }
	say("agent", "$ %s mcp serve --config … --sandbox tier1   (stdio)", cli)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	init := cs.InitializeResult()
	say("server", "%s %s, protocol %s", init.ServerInfo.Name, init.ServerInfo.Version, init.ProtocolVersion)

	names := func() ([]string, error) {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, t := range res.Tools {
			out = append(out, t.Name)
		}
		return out, nil
	}
	have, err := names()
	if err != nil {
		return err
	}
	say("agent", "tools/list → %v", have)
	say("agent", "task: list the DOIs in %q", sampleText)
	if slices.Contains(have, "extract_dois") {
		return errors.New("the server already had extract_dois")
	}
	say("agent", "no tool extracts DOIs; writing one and calling spawn_tool")
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "spawn_tool", Arguments: map[string]any{
		"name":            doiSpec.Name,
		"description":     doiSpec.Description,
		"parameters":      doiSpec.Parameters,
		"implementation":  doiSpec.Implementation,
		"allowed_imports": doiSpec.AllowedImports,
		"timeout_s":       doiSpec.Timeout.Seconds(),
	}})
	if err != nil {
		return err
	}
	say("server", "%s", textOf(r))
	select {
	case <-changed:
		say("server", "notifications/tools/list_changed")
	case <-time.After(10 * time.Second):
		return errors.New("no tools/list_changed notification")
	}
	if have, err = names(); err != nil {
		return err
	}
	say("agent", "tools/list → %v", have)
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "extract_dois", Arguments: map[string]any{"text": sampleText}})
	if err != nil {
		return err
	}
	say("agent", "tools/call extract_dois {text: …}")
	say("server", "%s (isError=%v)", textOf(r), r.IsError)
	var out struct {
		DOIs []string `json:"dois"`
	}
	if err := json.Unmarshal([]byte(textOf(r)), &out); err != nil || len(out.DOIs) != 2 {
		return fmt.Errorf("unexpected answer %q", textOf(r))
	}
	say("agent", "answer: %s", strings.Join(out.DOIs, ", "))

	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "extract_dois", Arguments: map[string]any{"txt": sampleText}})
	if err != nil {
		return err
	}
	say("agent", "tools/call extract_dois {txt: …}   (a typo)")
	say("server", "%s (isError=%v)", textOf(r), r.IsError)
	return nil
}

func textOf(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

func section(title string) {
	fmt.Printf("\n%s\n%s\n", title, strings.Repeat("─", len([]rune(title))))
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(prefix + l + "\n")
	}
	return b.String()
}

func oneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

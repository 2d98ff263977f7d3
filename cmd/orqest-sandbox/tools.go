package main

// `orqest-sandbox tools list|promote|forget --user U` (the per-user tool
// library of a session tier) and the session path of `run`.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

// executeInSession runs req on sb. When the sandbox declares sessions, it
// opens one for req.UserID ("anonymous" when empty) with req.SessionID (a
// generated one when empty), executes in it and closes it; the tool
// library's events of the call (promotion, pending, demotion, an unavailable
// library) are noted on stderr. Other sandboxes run req as is, and refuse
// a session or a tool name (refuseSessionless).
func executeInSession(ctx context.Context, e *env, h *host.Host, sb *host.Sandbox, req shared.ExecuteRequest, onChunk func(shared.OutputChunk)) (shared.ExecutionResult, error) {
	info, err := sb.Info(ctx)
	if err != nil {
		return shared.ExecutionResult{}, err
	}
	if !info.Has(shared.CapSessions) {
		if err := refuseSessionless(sb, req.SessionID, req.ToolName); err != nil {
			return shared.ExecutionResult{}, err
		}
		return sb.ExecuteStream(ctx, req, onChunk)
	}
	user := req.UserID
	if user == "" {
		user = "anonymous"
	}
	sub := h.Bus().Subscribe(64, toollib.EventPromotionPending, toollib.EventPromoted, toollib.EventDemoted, toollib.EventLibraryUnavailable, toollib.EventLibraryRepaired)
	defer sub.Close()
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: user, SessionID: req.SessionID})
	if err != nil {
		return shared.ExecutionResult{}, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := sb.CloseSession(cctx, open.SessionID); err != nil {
			fmt.Fprintf(e.stderr, "orqest-sandbox: closing session %s: %v\n", open.SessionID, err)
		}
	}()
	req.UserID, req.SessionID = user, open.SessionID
	res, err := sb.ExecuteStream(ctx, req, onChunk)
	for {
		select {
		case ev := <-sub.C:
			fmt.Fprintf(e.stderr, "orqest-sandbox: %s\n", describeEvent(ev))
			continue
		default:
		}
		break
	}
	return res, err
}

// refuseSessionless refuses --session and --tool on a sandbox without
// sessions, as `mcp serve` refuses run_python's session there and the host
// a dependency on a backend without that capability: a request that would
// otherwise run without what it asked for (its state, its tool library) is
// an error, not a warning. The error wraps shared.ErrNotSupported.
func refuseSessionless(sb *host.Sandbox, session, tool string) error {
	switch {
	case session != "":
		return fmt.Errorf("--session %q: sandbox %q (plugin %q) has no sessions, every run starts clean: drop --session, or run on a sandbox with sessions (plugin docker, gvisor or kubernetes; --sandbox NAME): %w",
			session, sb.Name(), sb.PluginName(), shared.ErrNotSupported)
	case tool != "":
		return fmt.Errorf("--tool %q: sandbox %q (plugin %q) keeps no tool library: drop --tool, or run on a sandbox with one (plugin docker, gvisor or kubernetes; --sandbox NAME): %w",
			tool, sb.Name(), sb.PluginName(), shared.ErrNotSupported)
	}
	return nil
}

func describeEvent(ev host.Event) string {
	p := ev.Payload
	hash, _ := p["code_hash"].(string)
	if len(hash) > 12 {
		hash = hash[:12]
	}
	switch ev.Type {
	case toollib.EventPromoted:
		return fmt.Sprintf("%s: tool %q (code %s) promoted by %v for user %v", ev.Type, ev.ToolName(), hash, p["promoted_by"], p["user"])
	case toollib.EventPromotionPending:
		return fmt.Sprintf("%s: tool %q (code %s) awaits an operator: orqest-sandbox tools promote --user %v %s", ev.Type, ev.ToolName(), hash, p["user"], ev.ToolName())
	case toollib.EventDemoted:
		return fmt.Sprintf("%s: tool %q (code %s) demoted after %v consecutive failures", ev.Type, ev.ToolName(), hash, p["consecutive_failures"])
	case toollib.EventLibraryUnavailable:
		return fmt.Sprintf("%s: the invocation of %q was not counted: %v", ev.Type, ev.ToolName(), p["error"])
	case toollib.EventLibraryRepaired:
		if moved, ok := p["moved_to"].(string); ok {
			return fmt.Sprintf("%s: the library of user %v was corrupt (%v); it was moved to %s and a fresh one created", ev.Type, p["user"], p["error"], moved)
		}
		return fmt.Sprintf("%s: the library of user %v was repaired: %v", ev.Type, p["user"], p["repairs"])
	}
	b, _ := json.Marshal(p)
	return ev.Type + " " + string(b)
}

func cmdTools(ctx context.Context, e *env, args []string) int {
	const synopsis = "tools list|promote|forget --user U [--config F] [--sandbox NAME] [--json] [NAME] [--hash H] [--by WHO] [--code]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprintf(e.stdout, "Usage: orqest-sandbox %s\n", synopsis)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "Usage: orqest-sandbox %s\n", synopsis)
		return exitError
	}
	sub := args[0]
	switch sub {
	case "list", "promote", "forget":
	default:
		fmt.Fprintf(e.stderr, "orqest-sandbox tools: unknown subcommand %q (want list, promote or forget)\n", sub)
		return exitError
	}
	fs := newFlagSet(e, "tools "+sub, synopsis)
	var config, sandbox, user, hash, by string
	var asJSON, withCode bool
	fs.StringVar(&config, "config", "", "policy file (default ./config.hcl, else the embedded default)")
	fs.StringVar(&sandbox, "sandbox", "", "a session sandbox with a tool library, e.g. docker (default: the policy's default sandbox)")
	fs.StringVar(&user, "user", "", "the user whose library to manage (required)")
	fs.StringVar(&hash, "hash", "", "promote/forget: only this code hash (default: promote the pending or most recent one; forget every hash)")
	fs.StringVar(&by, "by", "", "promote: who approves, recorded as promoted_by (default $USER, else operator)")
	fs.BoolVar(&asJSON, "json", false, "print one JSON object")
	fs.BoolVar(&withCode, "code", false, "list: include each entry's code")
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	if user == "" {
		fmt.Fprintf(e.stderr, "orqest-sandbox tools %s: --user U is required\n", sub)
		return exitError
	}
	var name string
	switch {
	case sub == "list" && len(pos) > 0:
		fmt.Fprintf(e.stderr, "orqest-sandbox tools list: unexpected arguments %q\n", pos)
		return exitError
	case sub != "list" && len(pos) != 1:
		fmt.Fprintf(e.stderr, "orqest-sandbox tools %s: give exactly one tool NAME\n", sub)
		return exitError
	case sub != "list":
		name = pos[0]
	}
	if sub == "promote" && by == "" {
		if by = os.Getenv("USER"); by == "" {
			by = "operator"
		}
	}

	h, sb, err := loadSandbox(ctx, config, sandbox)
	if err != nil {
		return reportErr(e, err)
	}
	defer h.Close()
	info, err := sb.Info(ctx)
	if err != nil {
		return reportErr(e, err)
	}
	if !info.Has(shared.CapToolLibrary) {
		fmt.Fprintf(e.stderr, "orqest-sandbox tools: sandbox %q (plugin %q) keeps no per-user tool library; name a docker sandbox with --sandbox\n", sb.Name(), sb.PluginName())
		return exitError
	}
	open, err := sb.Open(ctx, shared.OpenRequest{UserID: user, SessionID: "ops-" + randomID()})
	if err != nil {
		return reportErr(e, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := sb.CloseSession(cctx, open.SessionID); err != nil {
			fmt.Fprintf(e.stderr, "orqest-sandbox: closing session %s: %v\n", open.SessionID, err)
		}
	}()
	tok, err := sb.MintOperatorToken(ctx, open.SessionID, 2*time.Minute)
	if err != nil {
		return reportErr(e, err)
	}
	var out any
	switch sub {
	case "list":
		lib, err := sb.ListLibrary(ctx, open.SessionID, tok, withCode)
		if err != nil {
			return reportErr(e, err)
		}
		if !asJSON {
			printLibrary(e, lib)
			return exitOK
		}
		out = lib
	case "promote":
		ch, err := sb.PromoteTool(ctx, open.SessionID, tok, name, hash, by)
		if err != nil {
			return reportErr(e, err)
		}
		out = ch
		if !asJSON {
			if ch.Changed == 0 {
				fmt.Fprintf(e.stdout, "%s: %s\n", name, ch.Message)
			} else {
				fmt.Fprintf(e.stdout, "promoted %s (code %s) for user %s by %s\n", name, short(ch.Entry.CodeHash), user, ch.Entry.PromotedBy)
			}
			return exitOK
		}
	case "forget":
		ch, err := sb.ForgetTool(ctx, open.SessionID, tok, name, hash)
		if err != nil {
			return reportErr(e, err)
		}
		out = ch
		if !asJSON {
			fmt.Fprintf(e.stdout, "forgot %s for user %s (%d entries)\n", name, user, ch.Changed)
			return exitOK
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return reportErr(e, err)
	}
	fmt.Fprintf(e.stdout, "%s\n", b)
	return exitOK
}

func printLibrary(e *env, lib toollib.ListResult) {
	fmt.Fprintf(e.stdout, "user %s — %s — policy %s (threshold %d", lib.User, lib.Path, lib.Policy.Policy, lib.Policy.Threshold)
	if lib.Policy.DemoteAfterFailures > 0 {
		fmt.Fprintf(e.stdout, ", demote after %d failures", lib.Policy.DemoteAfterFailures)
	}
	fmt.Fprintln(e.stdout, ")")
	if len(lib.Tools) == 0 {
		fmt.Fprintln(e.stdout, "no tools")
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tCODE\tSTATUS\tOK\tFAILED\tMEAN MS\tLAST USED\tPROMOTED BY")
	for _, t := range lib.Tools {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.1f\t%s\t%s\n", t.Name, short(t.CodeHash), t.Status, t.Successes, t.Failures, t.MeanMS, t.LastUsed, t.PromotedBy)
	}
	tw.Flush()
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

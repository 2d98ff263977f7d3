package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared"
)

// `orqest-sandbox files put|get|ls`, `session close` and `sessions list`:
// the workspace and the sessions held by an `mcp serve --http` server
// (remote.go).

const filesSynopsis = "files put LOCAL [REMOTE] | get REMOTE [LOCAL|-] | ls [PATH] [--json]  [--addr URL] [--token-file F] [--session S]"

func cmdFiles(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(e.stderr, "Usage: orqest-sandbox %s\n", filesSynopsis)
		return exitError
	}
	fs := newFlagSet(e, "files "+args[0], filesSynopsis+"\n\n"+
		"Moves files in and out of a session's workspace on a server started with\n"+
		"`orqest-sandbox mcp serve --http`; the session outlives this command, so\n"+
		"`run --addr … --session S` reads what `files put` wrote and `files get`\n"+
		"fetches what the code wrote. Files are at most 8 MiB each.")
	var rf remoteFlags
	var asJSON bool
	rf.register(fs)
	fs.BoolVar(&asJSON, "json", false, "ls: print the server's answer as JSON")
	verb := args[0]
	switch verb {
	case "put", "get", "ls":
	case "-h", "--help", "help":
		fmt.Fprintf(e.stdout, "Usage: orqest-sandbox %s\n", filesSynopsis)
		return exitOK
	default:
		fmt.Fprintf(e.stderr, "orqest-sandbox files: unknown verb %q; want put, get or ls\n", verb)
		return exitError
	}
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "orqest-sandbox files %s: %v\n", verb, err)
		return exitError
	}
	// Check what needs no server first.
	var local, remotePath string
	var data []byte
	switch verb {
	case "put":
		if len(pos) < 1 || len(pos) > 2 {
			return fail(fmt.Errorf("want LOCAL [REMOTE], got %q", pos))
		}
		local, remotePath = pos[0], path.Base(filepath.ToSlash(pos[0]))
		if len(pos) == 2 {
			remotePath = pos[1]
		} else if local == "-" {
			return fail(fmt.Errorf("reading stdin (-) needs the REMOTE name"))
		}
		if data, err = readLocal(e, local); err != nil {
			return fail(err)
		}
	case "get":
		if len(pos) < 1 || len(pos) > 2 {
			return fail(fmt.Errorf("want REMOTE [LOCAL|-], got %q", pos))
		}
		remotePath, local = pos[0], path.Base(pos[0])
		if len(pos) == 2 {
			local = pos[1]
		}
	case "ls":
		if len(pos) > 1 {
			return fail(fmt.Errorf("want at most one PATH, got %q", pos))
		}
		if len(pos) == 1 {
			remotePath = pos[0]
		}
	}
	if err := shared.CheckFilePath("REMOTE", remotePath, verb == "ls"); err != nil {
		return fail(err)
	}

	r, err := dialRemote(ctx, rf, nil)
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	callArgs := map[string]any{"path": remotePath}
	if rf.session != "" {
		callArgs["session"] = rf.session
	}
	tool := map[string]string{"put": mcpPutFile, "get": mcpGetFile, "ls": mcpListFiles}[verb]
	if verb == "put" {
		callArgs["base64"] = base64.StdEncoding.EncodeToString(data)
	}
	res, err := r.call(ctx, tool, callArgs, nil)
	if err != nil {
		return fail(err)
	}
	if res.IsError {
		return fail(toolError(res))
	}
	switch verb {
	case "put":
		fmt.Fprintf(e.stdout, "%s -> %s (%d bytes)\n", local, remotePath, len(data))
	case "get":
		var out struct {
			Text   *string `json:"text"`
			Base64 *string `json:"base64"`
		}
		if err := decodeStructured(res, &out); err != nil {
			return fail(err)
		}
		var b []byte
		switch {
		case out.Text != nil:
			b = []byte(*out.Text)
		case out.Base64 != nil:
			if b, err = base64.StdEncoding.DecodeString(*out.Base64); err != nil {
				return fail(fmt.Errorf("the server's base64: %w", err))
			}
		default:
			return fail(fmt.Errorf("the server's answer holds no file: %w", shared.ErrInternal))
		}
		if err := writeLocal(e, local, b); err != nil {
			return fail(err)
		}
	case "ls":
		var out shared.ListFilesResponse
		if err := decodeStructured(res, &out); err != nil {
			return fail(err)
		}
		if asJSON {
			b, _ := json.Marshal(out.Files)
			fmt.Fprintf(e.stdout, "%s\n", b)
			return exitOK
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
		for _, f := range out.Files {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", f.Size, f.ModTime.UTC().Format("2006-01-02T15:04:05Z"), f.Name)
		}
		tw.Flush()
	}
	return exitOK
}

// readLocal reads an upload: a file or stdin ("-"), at most the
// workspace's per-file cap (checked before anything is sent).
func readLocal(e *env, name string) ([]byte, error) {
	var rd io.Reader = e.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		rd = f
	}
	b, err := io.ReadAll(io.LimitReader(rd, shared.DefaultMaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > shared.DefaultMaxFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes, the most a workspace file may hold: %w", name, shared.DefaultMaxFileBytes, shared.ErrInvalidArgument)
	}
	return b, nil
}

// writeLocal writes a download to stdout ("-") or to name, through a
// temporary file renamed over it, so a failure leaves no partial file.
func writeLocal(e *env, name string, data []byte) error {
	if name == "-" {
		_, err := e.stdout.Write(data)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".part-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// decodeStructured decodes a tool result's structured content into v.
func decodeStructured(res *mcp.CallToolResult, v any) error {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("the server's answer: %v: %w", err, shared.ErrInternal)
	}
	return nil
}

const sessionSynopsis = "session close|pause|resume NAME | sessions list [--json]  [--addr URL] [--token-file F]"

// cmdSession is `session close NAME` (its container, workspace and
// interpreter state go), `session pause NAME` (saved to disk: it holds no
// CPU and no memory), `session resume NAME`, and `sessions list` (the
// token's sessions on the server: name, id, state, idle time, when it
// opened), either spelling.
func cmdSession(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || (args[0] != "close" && args[0] != "list" && args[0] != "pause" && args[0] != "resume") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintf(e.stdout, "Usage: orqest-sandbox %s\n", sessionSynopsis)
			return exitOK
		}
		fmt.Fprintf(e.stderr, "Usage: orqest-sandbox %s\n", sessionSynopsis)
		return exitError
	}
	verb := args[0]
	fs := newFlagSet(e, "session "+verb, sessionSynopsis)
	var rf remoteFlags
	var asJSON bool
	if verb != "list" {
		rf.register(fs)
	} else {
		rf.registerServer(fs)
		fs.BoolVar(&asJSON, "json", false, "print the server's answer as JSON")
	}
	pos, err := parseFlags(fs, args[1:])
	if err != nil {
		return flagErr(err)
	}
	if verb == "list" {
		if len(pos) > 0 {
			fmt.Fprintf(e.stderr, "Usage: orqest-sandbox %s\n", sessionSynopsis)
			return exitError
		}
		return listSessions(ctx, e, rf, asJSON)
	}
	if len(pos) == 1 && rf.session == "" {
		rf.session = pos[0]
	}
	if rf.session == "" || len(pos) > 1 {
		fmt.Fprintf(e.stderr, "Usage: orqest-sandbox %s\n", sessionSynopsis)
		return exitError
	}
	r, err := dialRemote(ctx, rf, nil)
	if err != nil {
		return reportErr(e, err)
	}
	defer r.Close()
	tool := map[string]string{"close": mcpCloseSession, "pause": mcpPause, "resume": mcpResume}[verb]
	res, err := r.call(ctx, tool, map[string]any{"session": rf.session}, nil)
	if err == nil && res.IsError {
		err = toolError(res)
	}
	if err != nil {
		return reportErr(e, err)
	}
	switch verb {
	case "pause":
		var p shared.PauseResponse
		if err := decodeStructured(res, &p); err != nil {
			return reportErr(e, err)
		}
		kept := "its workspace and the globals listed as kept"
		if p.Memory {
			kept = "its memory"
		}
		fmt.Fprintf(e.stdout, "paused session %s (%d bytes saved, with %s)\n", rf.session, p.Bytes, kept)
		if len(p.NotKept) > 0 {
			fmt.Fprintf(e.stdout, "not kept: %s\n", strings.Join(p.NotKept, ", "))
		}
	case "resume":
		var p shared.ResumeResponse
		if err := decodeStructured(res, &p); err != nil {
			return reportErr(e, err)
		}
		fmt.Fprintf(e.stdout, "resumed session %s (state lost: %v)\n", rf.session, p.StateLost)
		if len(p.NotKept) > 0 {
			fmt.Fprintf(e.stdout, "not kept: %s\n", strings.Join(p.NotKept, ", "))
		}
	default:
		fmt.Fprintf(e.stdout, "closed session %s\n", rf.session)
	}
	return exitOK
}

// listSessions is `sessions list`: the server's list_sessions for this
// token's client, as a table (NAME ID STATE IDLE OPENED) or, with --json,
// as the server answered.
func listSessions(ctx context.Context, e *env, rf remoteFlags, asJSON bool) int {
	r, err := dialRemote(ctx, rf, nil)
	if err != nil {
		return reportErr(e, err)
	}
	defer r.Close()
	res, err := r.call(ctx, mcpListSessions, map[string]any{}, nil)
	if err == nil && res.IsError {
		err = toolError(res)
	}
	if err != nil {
		return reportErr(e, err)
	}
	var out sessionListing
	if err := decodeStructured(res, &out); err != nil {
		return reportErr(e, err)
	}
	if asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintf(e.stdout, "%s\n", b)
		return exitOK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tSTATE\tIDLE\tOPENED")
	for _, s := range out.Sessions {
		name := s.Name
		if s.Default {
			name = "(default)"
		}
		state := string(s.State)
		if s.Reason != "" {
			state += " (" + s.Reason + ")"
		}
		if s.InCall > 0 {
			state += fmt.Sprintf(", %d in call", s.InCall)
		}
		idle := (time.Duration(s.IdleForS * float64(time.Second))).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", name, s.ID, state, idle, s.Opened.UTC().Format("2006-01-02T15:04:05Z"))
	}
	tw.Flush()
	fmt.Fprintf(e.stdout, "%d open of max_sessions_per_user %d\n", countOpen(out.Sessions), out.MaxSessionsPerUser)
	return exitOK
}

// countOpen counts the sessions a listing shows open.
func countOpen(ss []sessionEntry) int {
	n := 0
	for _, s := range ss {
		if s.State == host.SessionOpen {
			n++
		}
	}
	return n
}

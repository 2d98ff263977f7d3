package agent

// The per-user persisted tool library.
//
// The user's volume is mounted at /data; the library is the SQLite file
// /data/orqest-tools.sqlite, opened with a pure-Go driver (modernc.org/sqlite)
// so the runtime stays a static binary. Every execute_python call that names
// a tool_name is counted per (tool name, code hash). The promotion policy
// (from the hello line) decides when a (name, hash) becomes a first-class
// MCP tool: it is then persisted as promoted, added to the server with
// AddTool (the SDK sends notifications/tools/list_changed) and replayed into
// the registry when the next session of the same user starts on the same
// volume. Another user has another volume, hence another library.
//
// A library that cannot be opened (corrupted file, locked by another
// process, unwritable volume) never stops the session: execute_python runs
// as usual, the call reports a tool.library_unavailable event naming the
// error, and the operator tools answer with the same error. The runtime
// retries opening it at most once a second. Before each open it repairs
// what it can (librepair.go): ownership and modes of its directory and
// files, and a corrupt database moved aside for a fresh one; each repair
// is logged and reported as a tool.library_repaired event.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	_ "modernc.org/sqlite" // pure-Go SQLite: the runtime stays a static binary

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

// Error classes of the library tools (besides those of agent.go).
const (
	classUnavailable = "unavailable"
	classNotFound    = "not_found"
)

const librarySchema = `
CREATE TABLE IF NOT EXISTS tools (
	name                 TEXT NOT NULL,
	code_hash            TEXT NOT NULL,
	code                 TEXT NOT NULL,
	allowed_imports      TEXT NOT NULL DEFAULT '[]',
	status               TEXT NOT NULL DEFAULT 'candidate',
	successes            INTEGER NOT NULL DEFAULT 0,
	failures             INTEGER NOT NULL DEFAULT 0,
	consecutive_failures INTEGER NOT NULL DEFAULT 0,
	total_ms             REAL NOT NULL DEFAULT 0,
	last_ms              REAL NOT NULL DEFAULT 0,
	first_seen           TEXT NOT NULL,
	last_used            TEXT NOT NULL,
	promoted_by          TEXT NOT NULL DEFAULT '',
	promoted_at          TEXT NOT NULL DEFAULT '',
	demoted_at           TEXT NOT NULL DEFAULT '',
	last_error           TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (name, code_hash)
);
CREATE INDEX IF NOT EXISTS tools_status ON tools(status);
`

const entryColumns = `name, code_hash, status, code, allowed_imports, successes, failures, consecutive_failures,
	total_ms, last_ms, first_seen, last_used, promoted_by, promoted_at, demoted_at, last_error`

// library is the runtime's handle on the user's tool library.
type library struct {
	path   string
	policy toollib.Promotion
	user   string
	log    *slog.Logger

	mu         sync.Mutex // serialises every library operation
	db         *sql.DB
	err        error
	tried      time.Time
	srv        *mcp.Server
	rt         *runtime
	registered map[string]string // MCP tool name -> code hash
	// ownDir: the library's directory belongs to the runtime alone (the
	// volume at /data), so its owner and mode are repaired too.
	ownDir bool
	// pending holds repair events not yet reported to a call.
	pending []toollib.Event
	// opened is the database file as it was when it was opened.
	opened os.FileInfo
}

// attachLibrary opens the library at path for the session's user (path ""
// disables it); ownDir is -library-own-dir (options.libraryOwnDir). A library that does not open is kept with its error: the
// session still runs code.
func (rt *runtime) attachLibrary(path string, ownDir bool) error {
	if path == "" {
		return nil
	}
	p := toollib.Promotion{}
	if rt.hello.Promotion != nil {
		p = *rt.hello.Promotion
	}
	p, err := p.Normalize()
	if err != nil {
		return err
	}
	l := &library{path: path, policy: p, user: rt.hello.User, log: rt.log, rt: rt, registered: map[string]string{},
		ownDir: path == rtproto.LibraryPath || ownDir}
	l.mu.Lock()
	_, err = l.handleLocked()
	l.mu.Unlock()
	if err != nil {
		rt.log.Error("tool library unavailable; the session runs code without it", "path", path, "error", err)
	} else {
		rt.log.Info("tool library open", "path", path, "policy", p.Policy, "threshold", p.Threshold)
	}
	rt.lib = l
	return nil
}

func openLibraryDB(path string) (*sql.DB, error) {
	// busy_timeout bounds how long a lock held by another process (another
	// session of the same user) is waited for; _txlock=immediate takes the
	// write lock when a transaction begins, so two writers never deadlock.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(1500)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, librarySchema); err != nil {
		db.Close()
		return nil, err
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM tools`).Scan(&n); err != nil {
		db.Close()
		return nil, err
	}
	// A file with a valid header can still have damaged pages.
	var check string
	if err := db.QueryRowContext(ctx, `PRAGMA quick_check(1)`).Scan(&check); err != nil {
		db.Close()
		return nil, err
	}
	if check != "ok" {
		db.Close()
		return nil, fmt.Errorf("%w: quick_check: %s", errCorrupt, check)
	}
	return db, nil
}

// handleLocked returns the open database, (re)trying to open it at most once
// a second. On a successful (re)open it replays the promoted tools into the
// server. l.mu must be held.
func (l *library) handleLocked() (*sql.DB, error) {
	if l.db != nil {
		why := l.fileChangedLocked()
		if why == "" {
			return l.db, nil
		}
		// Writes would go to a file no later session opens: start over on
		// the path (a fresh library when the file is gone).
		l.closeLocked()
		l.tried = time.Time{}
		l.repairedLocked(nil, []string{l.path + ": " + why + " while open; opened again"}, "")
	}
	if l.err != nil && time.Since(l.tried) < time.Second {
		return nil, l.err
	}
	l.tried = time.Now()
	done, err := l.repairOwnershipLocked()
	if err != nil {
		l.err = fmt.Errorf("tool library %s: %w", l.path, err)
		return nil, l.err
	}
	if len(done) > 0 {
		l.repairedLocked(nil, done, "")
	}
	db, err := openLibraryDB(l.path)
	if err != nil && isCorrupt(err) {
		moved, merr := l.moveAsideLocked()
		if merr != nil {
			l.err = fmt.Errorf("tool library %s: %w (and it could not be moved aside: %w)", l.path, err, merr)
			return nil, l.err
		}
		l.repairedLocked(err, []string{l.path + ": corrupt, moved aside; a fresh library was created"}, moved)
		db, err = openLibraryDB(l.path)
	}
	if err != nil {
		l.err = fmt.Errorf("tool library %s: %w", l.path, err)
		return nil, l.err
	}
	l.db, l.err = db, nil
	l.opened, _ = os.Stat(l.path)
	l.tightenLocked()
	if l.srv != nil {
		l.replayLocked()
	}
	return db, nil
}

// libraryTools adds the operator tools to s and replays the promoted tools
// of the library (so they are in the first tools/list). Hooked into
// runtime.server().
func (rt *runtime) libraryTools(s *mcp.Server) {
	if rt.lib == nil {
		return
	}
	s.AddTool(&mcp.Tool{
		Name:        toollib.ToolListTools,
		Description: "List the user's tool library: every (name, code hash) with its status, counts and latency (operator scope).",
		InputSchema: rtproto.ListSchema,
	}, rt.listTools)
	s.AddTool(&mcp.Tool{
		Name:        toollib.ToolPromote,
		Description: "Promote a library tool to a first-class MCP tool (operator scope).",
		InputSchema: rtproto.PromoteSchema,
	}, rt.promoteTool)
	s.AddTool(&mcp.Tool{
		Name:        toollib.ToolForget,
		Description: "Forget a library tool: delete its entries and unregister it (operator scope).",
		InputSchema: rtproto.ForgetSchema,
	}, rt.forgetTool)
	l := rt.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	l.srv = s
	l.registered = map[string]string{}
	if l.db != nil {
		l.replayLocked()
	}
}

// replayLocked registers every promoted entry as an MCP tool.
func (l *library) replayLocked() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	entries, err := queryEntries(ctx, l.db, `WHERE status = ? ORDER BY name`, toollib.StatusPromoted)
	if err != nil {
		l.log.Error("tool library: replay failed", "error", err)
		return
	}
	for _, e := range entries {
		l.registerLocked(e)
	}
	if len(entries) > 0 {
		l.log.Info("tool library replayed", "promoted", len(entries))
	}
}

func (l *library) registerLocked(e toollib.Entry) {
	if l.srv == nil {
		return
	}
	desc := fmt.Sprintf("Promoted library tool %q (code %s…, promoted by %s at %s). Pass its arguments as an object.", e.Name, e.CodeHash[:12], e.PromotedBy, e.PromotedAt)
	l.srv.AddTool(&mcp.Tool{Name: e.Name, Description: desc, InputSchema: rtproto.ToolSchema}, l.rt.promotedHandler(e))
	l.registered[e.Name] = e.CodeHash
}

func (l *library) unregisterLocked(name string) {
	if _, ok := l.registered[name]; ok && l.srv != nil {
		l.srv.RemoveTools(name)
		delete(l.registered, name)
	}
}

func queryEntries(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, where string, args ...any) ([]toollib.Entry, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+entryColumns+` FROM tools `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []toollib.Entry
	for rows.Next() {
		var e toollib.Entry
		var imports string
		var total float64
		if err := rows.Scan(&e.Name, &e.CodeHash, &e.Status, &e.Code, &imports, &e.Successes, &e.Failures, &e.ConsecutiveFailures,
			&total, &e.LastMS, &e.FirstSeen, &e.LastUsed, &e.PromotedBy, &e.PromotedAt, &e.DemotedAt, &e.LastError); err != nil {
			return nil, err
		}
		_ = json.Unmarshal([]byte(imports), &e.AllowedImports)
		if e.AllowedImports == nil {
			e.AllowedImports = []string{}
		}
		if n := e.Successes + e.Failures; n > 0 {
			e.MeanMS = total / float64(n)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func nowString() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// record counts one invocation of (name, hash(code)) and applies the
// promotion policy. It returns the events for the host's bus.
func (l *library) record(ctx context.Context, name, code string, imports []string, res shared.ExecutionResult) []toollib.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	db, err := l.handleLocked()
	if err != nil {
		return []toollib.Event{{Type: toollib.EventLibraryUnavailable, Payload: map[string]any{"tool_name": name, "user": l.user, "error": err.Error()}}}
	}
	evs, err := l.recordLocked(ctx, db, name, code, imports, res)
	if err != nil && !isBusy(err) {
		// The database failed under us (damaged, or its file changed):
		// close it and open it again now, repairing what can be repaired;
		// the invocation is then recorded in the reopened library.
		l.log.Error("tool library failed during a call; reopening it", "path", l.path, "error", err)
		l.closeLocked()
		l.tried = time.Time{}
		if db, rerr := l.handleLocked(); rerr == nil {
			evs, err = l.recordLocked(ctx, db, name, code, imports, res)
		} else {
			err = errors.Join(err, rerr)
		}
	}
	if err != nil {
		err = fmt.Errorf("tool library %s: recording %q: %w", l.path, name, err)
		l.log.Error("tool library", "error", err)
		return []toollib.Event{{Type: toollib.EventLibraryUnavailable, Payload: map[string]any{"tool_name": name, "user": l.user, "error": err.Error()}}}
	}
	return evs
}

func (l *library) recordLocked(ctx context.Context, db *sql.DB, name, code string, imports []string, res shared.ExecutionResult) ([]toollib.Event, error) {
	hash := toollib.CodeHash(code)
	if imports == nil {
		imports = []string{}
	}
	imp, _ := json.Marshal(imports)
	succ, fail := 0, 0
	lastErr := ""
	if res.Success {
		succ = 1
	} else {
		fail = 1
		lastErr = string(res.ErrorKind) + ": " + res.Error
		if len(lastErr) > 500 {
			lastErr = lastErr[:500]
		}
	}
	now := nowString()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `
INSERT INTO tools (name, code_hash, code, allowed_imports, status, successes, failures, consecutive_failures, total_ms, last_ms, first_seen, last_used, last_error)
VALUES (?, ?, ?, ?, 'candidate', ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name, code_hash) DO UPDATE SET
	successes = successes + excluded.successes,
	failures = failures + excluded.failures,
	consecutive_failures = CASE WHEN excluded.successes > 0 THEN 0 ELSE consecutive_failures + 1 END,
	total_ms = total_ms + excluded.total_ms,
	last_ms = excluded.last_ms,
	last_used = excluded.last_used,
	allowed_imports = CASE WHEN status = 'promoted' OR excluded.successes = 0 THEN allowed_imports ELSE excluded.allowed_imports END,
	last_error = CASE WHEN excluded.successes > 0 THEN last_error ELSE excluded.last_error END`,
		name, hash, code, string(imp), succ, fail, fail, res.DurationMS, res.DurationMS, now, now, lastErr)
	if err != nil {
		return nil, err
	}
	es, err := queryEntries(ctx, tx, `WHERE name = ? AND code_hash = ?`, name, hash)
	if err != nil || len(es) != 1 {
		return nil, errors.Join(err, errors.New("entry vanished"))
	}
	e := es[0]
	p := l.policy
	var evs []toollib.Event
	var toRegister *toollib.Entry
	var toUnregister string
	switch {
	case res.Success && e.Status == toollib.StatusCandidate && e.Successes >= int64(p.Threshold):
		if p.Policy == toollib.PolicyOperatorApproval {
			if _, err := tx.ExecContext(ctx, `UPDATE tools SET status = 'pending' WHERE name = ? AND code_hash = ?`, name, hash); err != nil {
				return nil, err
			}
			e.Status = toollib.StatusPending
			evs = append(evs, toollib.Event{Type: toollib.EventPromotionPending, Payload: l.payload(e, map[string]any{"policy": p.Policy})})
		} else {
			pe, ev, err := l.promoteTx(ctx, tx, e, "policy:"+p.Policy)
			if err != nil {
				return nil, err
			}
			toRegister, evs = &pe, append(evs, ev)
		}
	case !res.Success && e.Status == toollib.StatusPromoted && p.DemoteAfterFailures > 0 && e.ConsecutiveFailures >= int64(p.DemoteAfterFailures):
		if _, err := tx.ExecContext(ctx, `UPDATE tools SET status = 'demoted', demoted_at = ? WHERE name = ? AND code_hash = ?`, now, name, hash); err != nil {
			return nil, err
		}
		e.Status, e.DemotedAt = toollib.StatusDemoted, now
		if l.registered[name] == hash {
			toUnregister = name
		}
		evs = append(evs, toollib.Event{Type: toollib.EventDemoted, Payload: l.payload(e, map[string]any{
			"consecutive_failures": e.ConsecutiveFailures, "demote_after_failures": p.DemoteAfterFailures, "error": e.LastError,
		})})
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	if toRegister != nil {
		l.registerLocked(*toRegister)
	}
	if toUnregister != "" {
		l.unregisterLocked(toUnregister)
	}
	return evs, nil
}

// payload is the common payload of library events.
func (l *library) payload(e toollib.Entry, extra map[string]any) map[string]any {
	m := map[string]any{
		"tool_name": e.Name, "code_hash": e.CodeHash, "user": l.user, "status": e.Status,
		"successes": e.Successes, "failures": e.Failures,
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// promoteTx marks e promoted (any other promoted hash of the same name goes
// back to candidate) and returns the updated entry and its event.
func (l *library) promoteTx(ctx context.Context, tx *sql.Tx, e toollib.Entry, by string) (toollib.Entry, toollib.Event, error) {
	now := nowString()
	r, err := tx.ExecContext(ctx, `UPDATE tools SET status = 'candidate' WHERE name = ? AND code_hash <> ? AND status = 'promoted'`, e.Name, e.CodeHash)
	if err != nil {
		return e, toollib.Event{}, err
	}
	replaced, _ := r.RowsAffected()
	if _, err := tx.ExecContext(ctx, `UPDATE tools SET status = 'promoted', promoted_by = ?, promoted_at = ?, consecutive_failures = 0, demoted_at = '' WHERE name = ? AND code_hash = ?`,
		by, now, e.Name, e.CodeHash); err != nil {
		return e, toollib.Event{}, err
	}
	e.Status, e.PromotedBy, e.PromotedAt, e.ConsecutiveFailures, e.DemotedAt = toollib.StatusPromoted, by, now, 0, ""
	extra := map[string]any{"promoted_by": by, "policy": l.policy.Policy}
	if replaced > 0 {
		extra["replaced"] = replaced
	}
	return e, toollib.Event{Type: toollib.EventPromoted, Payload: l.payload(e, extra)}, nil
}

// libraryRecord is the hook of execute_python and of promoted tools: it
// counts the invocation when it names a tool and puts the library's events
// in the result's _meta.
func (rt *runtime) libraryRecord(ctx context.Context, a rtproto.ExecuteArgs, res shared.ExecutionResult, out *mcp.CallToolResult) {
	if rt.lib == nil {
		return
	}
	var evs []toollib.Event
	if a.ToolName != "" {
		evs = rt.lib.record(context.WithoutCancel(ctx), a.ToolName, a.Code, a.AllowedImports, res)
	}
	rt.lib.mu.Lock()
	evs = append(rt.lib.takePendingLocked(), evs...) // repairs first, once
	rt.lib.mu.Unlock()
	setEvents(out, evs)
}

func setEvents(out *mcp.CallToolResult, evs []toollib.Event) {
	if len(evs) == 0 {
		return
	}
	if out.Meta == nil {
		out.Meta = mcp.Meta{}
	}
	out.Meta[rtproto.MetaEvents] = evs
}

// checkToolName is the MCP-boundary check of execute_python's tool_name.
func checkToolName(name string) error {
	if name == "" {
		return nil
	}
	return rtproto.CheckToolName(name)
}

// promotedHandler serves a promoted tool: agent scope, its arguments are
// the `args` of the stored code, run with the stored imports.
func (rt *runtime) promotedHandler(e toollib.Entry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := rt.authorize(req, rtproto.ScopeAgent); err != nil {
			rt.log.Warn("call refused", "tool", e.Name, "error", err)
			return toolError(classUnauthorized, "%v", err), nil
		}
		args := json.RawMessage(req.Params.Arguments)
		if s := strings.TrimSpace(string(args)); s == "" || s == "null" {
			args = json.RawMessage("{}")
		}
		a := rtproto.ExecuteArgs{Code: e.Code, Args: args, AllowedImports: e.AllowedImports, ToolName: e.Name}
		var dropped []string
		if raw, ok := req.Params.Meta[rtproto.MetaPolicy]; ok {
			// The policy in force now, not the one the tool was promoted
			// under: a narrowed policy stops the tool before it runs.
			var p rtproto.ToolPolicy
			if b, err := json.Marshal(raw); err != nil || json.Unmarshal(b, &p) != nil {
				return toolError(classInvalidArgument, "the call's %s is not a policy", rtproto.MetaPolicy), nil
			}
			// The tool's allowlist narrows to what the policy still allows;
			// the child's checker then refuses code that imports a dropped
			// module before anything of it runs.
			dropped = p.Disallowed(e.AllowedImports)
			a.AllowedImports = slices.DeleteFunc(slices.Clone(e.AllowedImports), func(m string) bool { return slices.Contains(dropped, m) })
			a.TimeoutS, a.MemoryMB, a.MaxOutputBytes = p.TimeoutS, p.MemoryMB, p.MaxOutputBytes
		}
		res, err := rt.exec.run(ctx, a, progressOutput(ctx, req)) // a progress token streams the output, as execute_python
		if err == nil && len(dropped) > 0 && res.ErrorKind == shared.KindValidation {
			var why []string
			for _, f := range res.Findings {
				if f.Rule == "import-not-allowed" {
					why = append(why, f.Message)
				}
			}
			if len(why) > 0 {
				rt.log.Warn("promoted tool refused by the policy in force", "tool", e.Name, "dropped", dropped)
				return toolError(classPermissionDenied, "promoted tool %q imports what the policy in force no longer allows (%s; the policy dropped %s since it was promoted); the tool was not run. Re-promote a version within the policy, or forget it",
					e.Name, strings.Join(why, "; "), strings.Join(dropped, ", ")), nil
			}
		}
		if err != nil {
			class := classInternal
			if errors.Is(err, shared.ErrInvalidArgument) {
				class = classInvalidArgument
			}
			return toolError(class, "%v", err), nil
		}
		text, _ := json.Marshal(res)
		out := &mcp.CallToolResult{StructuredContent: res, Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, IsError: false}
		rt.libraryRecord(ctx, a, res, out)
		return out, nil
	}
}

// decodeStrict decodes a tool's arguments, refusing unknown fields.
func decodeStrict(raw json.RawMessage, v any) error {
	if s := strings.TrimSpace(string(raw)); s == "" || s == "null" {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func jsonResult(v any, evs []toollib.Event) *mcp.CallToolResult {
	text, _ := json.Marshal(v)
	out := &mcp.CallToolResult{StructuredContent: v, Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
	setEvents(out, evs)
	return out
}

func (rt *runtime) listTools(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := rt.authorize(req, rtproto.ScopeOperator); err != nil {
		rt.log.Warn("call refused", "tool", toollib.ToolListTools, "error", err)
		return toolError(classUnauthorized, "%v", err), nil
	}
	var a toollib.ListArgs
	if err := decodeStrict(req.Params.Arguments, &a); err != nil {
		return toolError(classInvalidArgument, "arguments: %v", err), nil
	}
	l := rt.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	db, err := l.handleLocked()
	if err != nil {
		return toolError(classUnavailable, "%v", err), nil
	}
	entries, err := queryEntries(ctx, db, `ORDER BY name, last_used DESC`)
	if err != nil {
		return toolError(classUnavailable, "tool library %s: %v", l.path, err), nil
	}
	if entries == nil {
		entries = []toollib.Entry{}
	}
	if !a.IncludeCode {
		for i := range entries {
			entries[i].Code = ""
		}
	}
	return jsonResult(toollib.ListResult{User: l.user, Path: l.path, Policy: l.policy, Tools: entries}, nil), nil
}

func (rt *runtime) promoteTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := rt.authorize(req, rtproto.ScopeOperator); err != nil {
		rt.log.Warn("call refused", "tool", toollib.ToolPromote, "error", err)
		return toolError(classUnauthorized, "%v", err), nil
	}
	var a toollib.PromoteArgs
	if err := decodeStrict(req.Params.Arguments, &a); err != nil {
		return toolError(classInvalidArgument, "arguments: %v", err), nil
	}
	if err := rtproto.CheckToolName(a.Name); err != nil {
		return toolError(classInvalidArgument, "%v", err), nil
	}
	by := strings.TrimSpace(a.By)
	if by == "" {
		by = "operator"
	}
	if len(by) > 128 {
		return toolError(classInvalidArgument, "by: at most 128 characters"), nil
	}
	l := rt.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	db, err := l.handleLocked()
	if err != nil {
		return toolError(classUnavailable, "%v", err), nil
	}
	where, args := `WHERE name = ? ORDER BY (status = 'pending') DESC, last_used DESC`, []any{a.Name}
	if a.CodeHash != "" {
		where, args = `WHERE name = ? AND code_hash = ?`, []any{a.Name, a.CodeHash}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return toolError(classUnavailable, "tool library %s: %v", l.path, err), nil
	}
	defer tx.Rollback()
	es, err := queryEntries(ctx, tx, where, args...)
	if err != nil {
		return toolError(classUnavailable, "tool library %s: %v", l.path, err), nil
	}
	if len(es) == 0 {
		return toolError(classNotFound, "no library entry %q%s for user %q (run it with tool_name first)", a.Name, hashSuffix(a.CodeHash), l.user), nil
	}
	e := es[0]
	if e.Status == toollib.StatusPromoted {
		return jsonResult(toollib.ChangeResult{Name: e.Name, Entry: &e, Message: "already promoted"}, nil), nil
	}
	pe, ev, err := l.promoteTx(ctx, tx, e, by)
	if err != nil {
		return toolError(classUnavailable, "tool library %s: %v", l.path, err), nil
	}
	if err := tx.Commit(); err != nil {
		return toolError(classUnavailable, "tool library %s: %v", l.path, err), nil
	}
	l.registerLocked(pe)
	pe.Code = ""
	evs := []toollib.Event{ev}
	rt.log.Info("tool promoted", "tool", pe.Name, "code_hash", pe.CodeHash, "by", by)
	return jsonResult(toollib.ChangeResult{Name: pe.Name, Changed: 1, Entry: &pe, Events: evs}, evs), nil
}

func (rt *runtime) forgetTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if err := rt.authorize(req, rtproto.ScopeOperator); err != nil {
		rt.log.Warn("call refused", "tool", toollib.ToolForget, "error", err)
		return toolError(classUnauthorized, "%v", err), nil
	}
	var a toollib.ForgetArgs
	if err := decodeStrict(req.Params.Arguments, &a); err != nil {
		return toolError(classInvalidArgument, "arguments: %v", err), nil
	}
	if err := rtproto.CheckToolName(a.Name); err != nil {
		return toolError(classInvalidArgument, "%v", err), nil
	}
	l := rt.lib
	l.mu.Lock()
	defer l.mu.Unlock()
	db, err := l.handleLocked()
	if err != nil {
		return toolError(classUnavailable, "%v", err), nil
	}
	q, args := `DELETE FROM tools WHERE name = ?`, []any{a.Name}
	if a.CodeHash != "" {
		q, args = q+` AND code_hash = ?`, append(args, a.CodeHash)
	}
	r, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return toolError(classUnavailable, "tool library %s: %v", l.path, err), nil
	}
	n, _ := r.RowsAffected()
	if n == 0 {
		return toolError(classNotFound, "no library entry %q%s for user %q", a.Name, hashSuffix(a.CodeHash), l.user), nil
	}
	if h, ok := l.registered[a.Name]; ok && (a.CodeHash == "" || a.CodeHash == h) {
		l.unregisterLocked(a.Name)
	}
	payload := map[string]any{"tool_name": a.Name, "user": l.user, "removed": n}
	if a.CodeHash != "" {
		payload["code_hash"] = a.CodeHash
	}
	evs := []toollib.Event{{Type: toollib.EventForgotten, Payload: payload}}
	rt.log.Info("tool forgotten", "tool", a.Name, "removed", n)
	return jsonResult(toollib.ChangeResult{Name: a.Name, Changed: int(n), Events: evs}, evs), nil
}

func hashSuffix(h string) string {
	if h == "" {
		return ""
	}
	return " (code hash " + h + ")"
}

package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// Sessions and files of `mcp serve --http` on a session tier. Each client
// (a bearer-token identity) has a default session, opened at its first
// execution, and named ones: a tool's optional `session` argument names
// one, so several processes holding the same token (an agent, or CLI
// commands one after another: `files put`, `run --session`, `files get`)
// share a session that outlives each of them. put_file and run_python open
// a named session on first use; get_file and list_files of a name never
// opened are refused (not_found) rather than answering from an empty new
// container; close_session ends one; list_sessions lists them;
// pause_session saves one to disk (on a backend with the pause capability:
// it then holds no CPU and no memory) and resume_session, or its next
// call, brings it back. A paused session outlives the server: it is not
// closed when the server ends (its id is printed), and the Go API
// (host.Sandbox.ResumeSession) resumes it by that id.
//
// The host bounds and reclaims them (host/sessions.go, the policy's
// sessions block and idle_timeout): a client's sessions, its default one
// included, count against max_sessions_per_user (its identity is the
// user), all clients' against max_sessions; a session idle for the
// sandbox's idle_timeout is closed, and the next call on its name runs in
// a new session under the same id (state_lost). Sessions end with the
// server.

// MCP tools of a session tier with a writable workspace (shared.CapFiles):
// files the client uploads are what its code reads; files its code writes
// are what it downloads. close_session and list_sessions are on every
// session tier.
const (
	mcpPutFile      = "put_file"
	mcpGetFile      = "get_file"
	mcpListFiles    = "list_files"
	mcpCloseSession = "close_session"
	mcpListSessions = "list_sessions"
	mcpPause        = "pause_session"
	mcpResume       = "resume_session"
	// mcpMaxRequestBytes bounds an HTTP request body: a put_file of a
	// file at the workspace's per-file cap, base64-encoded, fits.
	mcpMaxRequestBytes = shared.DefaultMaxFileBytes/3*4 + 1<<20
)

// listSessionsSchema is list_sessions' input schema: no arguments.
const listSessionsSchema = `{"type":"object","properties":{},"additionalProperties":false}`

// sessionArgSchema is the JSON schema of the tools' `session` argument.
const sessionArgSchema = `{"type": "string", "pattern": "^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$", "description": "a named session of this client (default: the client's own session); put_file and run_python open it on first use, so processes sharing the client's token share it"}`

// exposeFiles adds put_file, get_file and list_files to the client's
// server: each acts on the workspace of the client's session, or of the
// named session its `session` argument names (Sandbox.PutFile, GetFile,
// ListFiles).
func (c *mcpClients) exposeFiles(cl *mcpClient, user string) {
	srv := cl.srv.server
	srv.AddTool(&mcp.Tool{
		Name:        mcpPutFile,
		Title:       "Upload a file",
		Description: "Write a file into your session's workspace, where run_python code reads it as workspace.read_text(path) or workspace.read_bytes(path). Give `text`, or `base64` for binary data.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","description":"a relative path, e.g. data.csv"},"text":{"type":"string"},"base64":{"type":"string"},"session":` + sessionArgSchema + `},"required":["path"],"additionalProperties":false}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Path    string  `json:"path"`
			Text    *string `json:"text"`
			Base64  *string `json:"base64"`
			Session string  `json:"session"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return argError(mcpPutFile, "", err.Error()), nil
		}
		var data []byte
		switch {
		case in.Text != nil && in.Base64 == nil:
			data = []byte(*in.Text)
		case in.Base64 != nil && in.Text == nil:
			b, err := base64.StdEncoding.DecodeString(*in.Base64)
			if err != nil {
				return argError(mcpPutFile, "base64", "not standard base64: "+err.Error()), nil
			}
			data = b
		default:
			return argError(mcpPutFile, "text", "give exactly one of text and base64"), nil
		}
		sid, err := c.sessionNamed(ctx, cl, user, in.Session, true)
		if err != nil {
			return classedError(mcpPutFile, err), nil
		}
		r, err := c.sb.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: in.Path, Data: data})
		if err != nil {
			return classedError(mcpPutFile, err), nil
		}
		return jsonResult(r), nil
	})
	srv.AddTool(&mcp.Tool{
		Name:        mcpGetFile,
		Title:       "Download a file",
		Description: "Read a file of your session's workspace (one your code wrote, or an artifact marked omitted). UTF-8 text comes back as text, anything else as base64.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"session":` + sessionArgSchema + `},"required":["path"],"additionalProperties":false}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Path    string `json:"path"`
			Session string `json:"session"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return argError(mcpGetFile, "", err.Error()), nil
		}
		sid, err := c.sessionNamed(ctx, cl, user, in.Session, false)
		if err != nil {
			return classedError(mcpGetFile, err), nil
		}
		r, err := c.sb.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: in.Path})
		if err != nil {
			return classedError(mcpGetFile, err), nil
		}
		out := map[string]any{"path": in.Path, "size": len(r.Data)}
		if utf8.Valid(r.Data) {
			out["text"] = string(r.Data)
		} else {
			out["base64"] = base64.StdEncoding.EncodeToString(r.Data)
		}
		return jsonResult(out), nil
	})
	srv.AddTool(&mcp.Tool{
		Name:        mcpListFiles,
		Title:       "List files",
		Description: "List the files of your session's workspace (under `path` when given).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"session":` + sessionArgSchema + `},"additionalProperties":false}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Path    string `json:"path"`
			Session string `json:"session"`
		}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return argError(mcpListFiles, "", err.Error()), nil
			}
		}
		sid, err := c.sessionNamed(ctx, cl, user, in.Session, false)
		if err != nil {
			return classedError(mcpListFiles, err), nil
		}
		r, err := c.sb.ListFiles(ctx, shared.ListFilesRequest{SessionID: sid, Path: in.Path})
		if err != nil {
			return classedError(mcpListFiles, err), nil
		}
		return jsonResult(r), nil
	})
}

// exposeSessions adds close_session to the client's server: it ends one
// of the client's named sessions (its container, its workspace, its
// interpreters) and frees its place.
func (c *mcpClients) exposeSessions(cl *mcpClient, user string) {
	cl.srv.server.AddTool(&mcp.Tool{
		Name:        mcpCloseSession,
		Title:       "Close a named session",
		Description: "End one of your named sessions: its workspace files and interpreter state are gone; the name can be opened again afresh.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"session":` + sessionArgSchema + `},"required":["session"],"additionalProperties":false}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Session string `json:"session"`
		}
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return argError(mcpCloseSession, "", err.Error()), nil
		}
		if in.Session == "" {
			return argError(mcpCloseSession, "session", "missing: name the session to close"), nil
		}
		sid, err := c.sessionNamed(ctx, cl, user, in.Session, false)
		if err != nil {
			return classedError(mcpCloseSession, err), nil
		}
		cl.mu.Lock()
		delete(cl.named, in.Session)
		cl.mu.Unlock()
		if err := c.sb.CloseSession(ctx, sid); err != nil {
			return classedError(mcpCloseSession, err), nil
		}
		return jsonResult(map[string]any{"closed": in.Session}), nil
	})
	cl.srv.server.AddTool(&mcp.Tool{
		Name:        mcpPause,
		Title:       "Pause a named session",
		Description: "Save one of your named sessions to disk and stop everything of it that runs, so it holds no CPU and no memory; resume_session (or its next call) brings it back. On a backend with the pause_memory capability (gvisor) it comes back with its memory: every name your code defined. Refused while a call of it runs (error class session_busy), and on a backend that cannot pause (not_supported).",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"session":` + sessionArgSchema + `},"required":["session"],"additionalProperties":false}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sid, bad := c.namedArg(ctx, cl, user, mcpPause, req)
		if bad != nil {
			return bad, nil
		}
		r, err := c.sb.PauseSession(ctx, sid)
		if err != nil {
			return classedError(mcpPause, err), nil
		}
		return jsonResult(r), nil
	})
	cl.srv.server.AddTool(&mcp.Tool{
		Name:        mcpResume,
		Title:       "Resume a paused session",
		Description: "Bring back one of your paused sessions: with its memory on a backend with pause_memory; otherwise state_lost is true and not_kept names what did not come back.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"session":` + sessionArgSchema + `},"required":["session"],"additionalProperties":false}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		sid, bad := c.namedArg(ctx, cl, user, mcpResume, req)
		if bad != nil {
			return bad, nil
		}
		r, err := c.sb.ResumeSession(ctx, sid)
		if err != nil {
			return classedError(mcpResume, err), nil
		}
		return jsonResult(r), nil
	})
	cl.srv.server.AddTool(&mcp.Tool{
		Name:        mcpListSessions,
		Title:       "List your sessions",
		Description: "List your sessions on this server (the default one has name \"\" and default true): id, state (open; paused: saved by pause_session, the next call resumes it; or reclaimed: the server closed it after idle_timeout and the next call reopens it empty), how long it has been idle, when it opened; and max_sessions_per_user, how many you may keep open.",
		InputSchema: json.RawMessage(listSessionsSchema),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if field := unknownProp(req.Params.Arguments, listSessionsSchema); field != "" {
			return argError(mcpListSessions, field, "unknown argument; list_sessions takes none"), nil
		}
		return jsonResult(c.listSessions(cl)), nil
	})
}

// namedArg reads the `session` argument of tool (pause_session,
// resume_session): the backend id of one of cl's open named sessions, or
// the error result to answer.
func (c *mcpClients) namedArg(ctx context.Context, cl *mcpClient, user, tool string, req *mcp.CallToolRequest) (string, *mcp.CallToolResult) {
	var in struct {
		Session string `json:"session"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
		return "", argError(tool, "", err.Error())
	}
	if in.Session == "" {
		return "", argError(tool, "session", "missing: name the session")
	}
	sid, err := c.sessionNamed(ctx, cl, user, in.Session, false)
	if err != nil {
		return "", classedError(tool, err)
	}
	return sid, nil
}

// sessionListing is list_sessions' answer.
type sessionListing struct {
	Sessions []sessionEntry `json:"sessions"`
	// MaxSessionsPerUser is the host's max_sessions_per_user: the most
	// sessions (the default one included) the client may keep open.
	MaxSessionsPerUser int `json:"max_sessions_per_user"`
}

// sessionEntry is one session of list_sessions.
type sessionEntry struct {
	Name     string            `json:"name"` // "" for the default session
	Default  bool              `json:"default,omitempty"`
	ID       string            `json:"id"`
	State    host.SessionState `json:"state"`
	Reason   string            `json:"reason,omitempty"` // why a reclaimed session was closed
	IdleForS float64           `json:"idle_for_s"`
	InCall   int               `json:"in_call"`
	Opened   time.Time         `json:"opened"`
	LastUsed time.Time         `json:"last_used"`
}

// listSessions lists cl's sessions, the default one first, then by name;
// a session the host no longer knows (its tombstone expired) is dropped.
func (c *mcpClients) listSessions(cl *mcpClient) sessionListing {
	out := sessionListing{Sessions: []sessionEntry{}, MaxSessionsPerUser: c.maxPerUser}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	add := func(name, id string) bool {
		info, ok := c.sb.Session(id)
		if !ok {
			return false
		}
		out.Sessions = append(out.Sessions, sessionEntry{Name: name, Default: name == "", ID: id, State: info.State, Reason: info.Reason,
			IdleForS: info.IdleFor.Seconds(), InCall: info.InCall, Opened: info.Opened, LastUsed: info.LastUsed})
		return true
	}
	if cl.session != "" && !add("", cl.session) {
		cl.session = ""
	}
	names := make([]string, 0, len(cl.named))
	for n := range cl.named {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !add(n, cl.named[n]) {
			delete(cl.named, n)
		}
	}
	return out
}

// openSession returns cl's default session, opening it the first time
// (again after a failed open).
func (c *mcpClients) openSession(ctx context.Context, cl *mcpClient, user string) (string, error) {
	return c.sessionNamed(ctx, cl, user, "", true)
}

// sessionNamed returns the backend session of cl's session name ("" the
// default one). A name not open yet is opened when create, and is
// ErrNotFound otherwise; a bad name is a *shared.FieldError on "session".
// The host caps the client's sessions (max_sessions_per_user for its
// identity, max_sessions for all): at a cap it closes the client's (or
// anyone's) least recently used idle session, or refuses the Open with a
// *host.SessionLimitError (ErrFailedPrecondition). A session the host
// reclaimed keeps its id (the host reopens it at its next call); one the
// host no longer knows at all is opened afresh, as a name never opened.
// The backend picks the session id, so two clients' sessions of the same
// name never meet.
func (c *mcpClients) sessionNamed(ctx context.Context, cl *mcpClient, user, name string, create bool) (string, error) {
	if name != "" {
		if err := rtproto.CheckID("session", name); err != nil {
			return "", &shared.FieldError{Field: "session", Reason: err.Error()}
		}
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if name == "" && cl.session != "" {
		if _, known := c.sb.Session(cl.session); known {
			return cl.session, nil
		}
		cl.session = "" // forgotten by the host: open a new one
	}
	if sid, ok := cl.named[name]; name != "" && ok {
		if _, known := c.sb.Session(sid); known {
			return sid, nil
		}
		delete(cl.named, name)
	}
	if name != "" && !create {
		return "", fmt.Errorf("session %q of client %q is not open (open sessions: %s); put_file or run_python with this session opens it: %w", name, user, cl.namesLocked(), shared.ErrNotFound)
	}
	r, err := c.sb.Open(ctx, shared.OpenRequest{UserID: user})
	if err != nil {
		var lim *host.SessionLimitError
		if errors.As(err, &lim) {
			return "", fmt.Errorf("client %q (named sessions: %s): %w", user, cl.namesLocked(), err)
		}
		return "", err
	}
	if name == "" {
		cl.session = r.SessionID
	} else {
		cl.named[name] = r.SessionID
	}
	return r.SessionID, nil
}

// namesLocked lists cl's named sessions, sorted, for a message; cl.mu is
// held.
func (cl *mcpClient) namesLocked() string {
	if len(cl.named) == 0 {
		return "none"
	}
	names := make([]string, 0, len(cl.named))
	for n := range cl.named {
		names = append(names, n)
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}

// close ends the clients' sessions, default and named.
func (c *mcpClients) close(e *env) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, cl := range c.byID {
		cl.mu.Lock()
		sids := map[string]string{}
		if cl.session != "" {
			sids[""] = cl.session
		}
		for n, sid := range cl.named {
			sids[n] = sid
		}
		for n, sid := range sids {
			if info, ok := c.sb.Session(sid); ok && info.State == host.SessionPaused {
				// Saved on disk: it outlives the server.
				fmt.Fprintf(e.stderr, "orqest-sandbox: session %q of client %q is paused and kept (id %s)\n", n, id, sid)
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := c.sb.CloseSession(ctx, sid); err != nil {
				fmt.Fprintf(e.stderr, "orqest-sandbox: closing session %q of client %q: %v\n", n, id, err)
			}
			cancel()
		}
		cl.mu.Unlock()
	}
}

// classedError is the error result of a tool whose call failed with err:
// the message, and as structured content the error classes err matches
// (plugin.ErrorClasses: "not_found", "invalid_argument", ...) and the
// field at fault, so a client acts on the class, not the text.
func classedError(tool string, err error) *mcp.CallToolResult {
	st := map[string]any{"error": err.Error(), "error_classes": plugin.ErrorClasses(err)}
	var fe *shared.FieldError
	if errors.As(err, &fe) {
		st["field"] = fe.Field
	}
	return errorResult(tool+": "+err.Error(), st)
}

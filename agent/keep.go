package agent

// The stateful interpreters' globals saved as plain data for a pause that
// keeps no memory (tier 2: the container is removed), and put back in the
// session's next container: save_state asks every agent's interpreter for
// its globals in the runner's typed encoding (runner.OpSaveGlobals, never
// pickle); restore_state loads them into the agent's interpreter when it
// runs already (a session stateful by default starts the default agent's
// while it opens), else keeps them until the agent's next stateful call
// starts one.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// keepTimeout bounds one interpreter's save or load of its globals.
const keepTimeout = time.Minute

// keptGlobals are the globals restore_state brought for agents that had
// no interpreter yet, by agent id.
type keptGlobals struct {
	mu      sync.Mutex
	pending map[string]json.RawMessage
}

// keepOutput is the runner's output of a save or a load.
type keepOutput struct {
	Globals json.RawMessage   `json:"globals"`
	Kept    []string          `json:"kept"`
	NotKept map[string]string `json:"not_kept"`
}

// runKeep runs op (runner.OpSaveGlobals, or runner.OpLoadGlobals of
// globals) in nb. An interpreter the call ended is an error naming the
// loss.
func runKeep(ctx context.Context, nb *pyproc.Notebook, op string, globals json.RawMessage) (keepOutput, error) {
	job := pyproc.Job{
		Request: runner.Request{Op: op, Args: globals},
		// The output holds the saved globals, which the runner bounds to
		// MaxSavedStateBytes; the cap leaves room for the names.
		Limits: shared.Resolved{Timeout: keepTimeout, MaxOutputBytes: rtproto.MaxSavedStateBytes + 4<<20},
	}
	res, lost, err := nb.Run(ctx, job)
	if err != nil {
		return keepOutput{}, err
	}
	if lost {
		return keepOutput{}, fmt.Errorf("the stateful interpreter ended while its globals were handled (%s: %s); its state is lost: %w", res.ErrorKind, res.Error, shared.ErrUnavailable)
	}
	if !res.Success {
		return keepOutput{}, fmt.Errorf("the stateful interpreter refused: %s: %w", res.Error, shared.ErrInternal)
	}
	var o keepOutput
	if err := json.Unmarshal(res.Output, &o); err != nil {
		return keepOutput{}, fmt.Errorf("malformed saved globals: %v: %w", err, shared.ErrInternal)
	}
	return o, nil
}

// qualified returns agent's names as "agent/name", sorted.
func qualified(agent string, names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, agent+"/"+n)
	}
	slices.Sort(out)
	return out
}

// saveState saves every live stateful interpreter's plain globals, and
// carries over those a resume brought that no call has loaded yet. The
// interpreters keep running: the session is unchanged.
func (e *executor) saveState(ctx context.Context) (rtproto.SavedState, error) {
	e.nbMu.Lock()
	live := map[string]*pyproc.Notebook{}
	for agent, n := range e.notebooks {
		if n.nb.Alive() {
			live[agent] = n.nb
		}
	}
	e.nbMu.Unlock()
	out := rtproto.SavedState{Agents: map[string]json.RawMessage{}}
	total := 0
	for _, agent := range slices.Sorted(maps.Keys(live)) {
		o, err := runKeep(ctx, live[agent], runner.OpSaveGlobals, nil)
		if err != nil {
			return rtproto.SavedState{}, fmt.Errorf("saving agent %q's globals: %w", agent, err)
		}
		notKept := slices.Sorted(maps.Keys(o.NotKept))
		for _, n := range notKept {
			e.logger().Debug("a global is not kept by the pause", "agent", agent, "name", n, "reason", o.NotKept[n])
		}
		if total+len(o.Globals) > rtproto.MaxSavedStateBytes {
			// Past the session's bound: this agent's globals all go.
			notKept = append(notKept, o.Kept...)
			o.Kept = nil
			o.Globals = nil
		}
		if o.Globals != nil {
			total += len(o.Globals)
			out.Agents[agent] = o.Globals
		}
		out.Kept = append(out.Kept, qualified(agent, o.Kept)...)
		out.NotKept = append(out.NotKept, qualified(agent, notKept)...)
	}
	e.kept.mu.Lock()
	for agent, raw := range e.kept.pending {
		if _, ok := out.Agents[agent]; ok || total+len(raw) > rtproto.MaxSavedStateBytes {
			continue
		}
		var names map[string]json.RawMessage
		if json.Unmarshal(raw, &names) != nil {
			continue
		}
		total += len(raw)
		out.Agents[agent] = raw
		out.Kept = append(out.Kept, qualified(agent, slices.Collect(maps.Keys(names)))...)
	}
	e.kept.mu.Unlock()
	slices.Sort(out.Kept)
	slices.Sort(out.NotKept)
	return out, nil
}

// restoreState loads st's globals into the agents' interpreters that run
// now and keeps the others' for their agent's first stateful call.
func (e *executor) restoreState(ctx context.Context, st rtproto.SavedState) (rtproto.RestoreStateResult, error) {
	var out rtproto.RestoreStateResult
	for _, agent := range slices.Sorted(maps.Keys(st.Agents)) {
		if err := rtproto.CheckID("agent_id", agent); err != nil {
			return out, fmt.Errorf("restore_state: %w: %w", err, shared.ErrInvalidArgument)
		}
	}
	for _, agent := range slices.Sorted(maps.Keys(st.Agents)) {
		raw := st.Agents[agent]
		e.nbMu.Lock()
		cur := e.notebooks[agent]
		e.nbMu.Unlock()
		if cur == nil || !cur.nb.Alive() {
			e.kept.mu.Lock()
			if e.kept.pending == nil {
				e.kept.pending = map[string]json.RawMessage{}
			}
			e.kept.pending[agent] = raw
			e.kept.mu.Unlock()
			out.Pending = append(out.Pending, agent)
			continue
		}
		o, err := runKeep(ctx, cur.nb, runner.OpLoadGlobals, raw)
		if err != nil {
			return out, fmt.Errorf("restoring agent %q's globals: %w", agent, err)
		}
		out.Kept = append(out.Kept, qualified(agent, o.Kept)...)
		out.NotKept = append(out.NotKept, qualified(agent, slices.Collect(maps.Keys(o.NotKept)))...)
	}
	slices.Sort(out.Kept)
	slices.Sort(out.NotKept)
	return out, nil
}

// loadPending loads into nb, agent's interpreter, the globals a resume
// kept for it, once. It returns a line for the call's stderr when some
// could not be loaded ("" otherwise).
func (e *executor) loadPending(ctx context.Context, agent string, nb *pyproc.Notebook) string {
	e.kept.mu.Lock()
	raw, ok := e.kept.pending[agent]
	delete(e.kept.pending, agent)
	e.kept.mu.Unlock()
	if !ok {
		return ""
	}
	o, err := runKeep(ctx, nb, runner.OpLoadGlobals, raw)
	if err != nil {
		e.logger().Warn("the globals a pause kept could not be loaded", "agent", agent, "error", err)
		return fmt.Sprintf("orqest: the globals this session's pause kept could not be loaded: %v\n", err)
	}
	if len(o.NotKept) == 0 {
		return ""
	}
	return fmt.Sprintf("orqest: globals this session's pause kept could not be loaded: %s\n", strings.Join(slices.Sorted(maps.Keys(o.NotKept)), ", "))
}

// keepTools adds save_state and restore_state (agent scope: what they
// carry is the session's own data, and loading it builds plain values
// only).
func (rt *runtime) keepTools(s *mcp.Server) {
	tool := func(name string, do func(ctx context.Context, raw json.RawMessage) (any, error)) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if err := rt.authorize(req, rtproto.ScopeAgent); err != nil {
				rt.log.Warn("call refused", "tool", name, "error", err)
				return toolError(classUnauthorized, "%v", err), nil
			}
			res, err := do(ctx, req.Params.Arguments)
			if err != nil {
				return toolError(errorClass(err), "%v", err), nil
			}
			text, err := json.Marshal(res)
			if err != nil {
				return toolError(classInternal, "%v", err), nil
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
		}
	}
	s.AddTool(&mcp.Tool{Name: rtproto.ToolSaveState, Description: "Save the stateful interpreters' globals that are plain data (a pause of the session).", InputSchema: map[string]any{"type": "object"}},
		tool(rtproto.ToolSaveState, func(ctx context.Context, _ json.RawMessage) (any, error) {
			return rt.exec.saveState(ctx)
		}))
	s.AddTool(&mcp.Tool{Name: rtproto.ToolRestoreState, Description: "Load globals save_state saved (the resume of a paused session).", InputSchema: map[string]any{"type": "object"}},
		tool(rtproto.ToolRestoreState, func(ctx context.Context, raw json.RawMessage) (any, error) {
			var st rtproto.SavedState
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&st); err != nil {
				return nil, fmt.Errorf("arguments: %v: %w", err, shared.ErrInvalidArgument)
			}
			return rt.exec.restoreState(ctx, st)
		}))
}

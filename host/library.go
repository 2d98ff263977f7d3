package host

// The host side of a per-user tool library (tier 2): the backend's events
// on the host bus, operator tokens (MintOperatorToken) and the operator
// calls list_tools / promote_tool / forget_tool. The promotion policy is an
// option of the backend that keeps the library, a nested block of its
// config schema:
//
//	sandbox "docker" {
//	  plugin = "docker"
//	  config {
//	    image = "orqest/agent-runtime:0.1.0"
//	    promotion {
//	      policy                = "threshold"   # | "eager" | "operator_approval"
//	      threshold             = 3             # successes of one (name, code hash)
//	      demote_after_failures = 5             # 0: never
//	    }
//	  }
//	}

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

// A per-user tool library's events (toollib.Event*), reported by the
// backend in ExecuteResponse.Events and CallToolResponse.Events, are
// published on the host's bus with the sandbox's name.

// LegacyPromotion is a `promotion {}` block written at the sandbox level,
// where it lived before it moved into the backend's config block: it is
// only kept to point the operator at the new place.
type LegacyPromotion struct {
	Remain   hcl.Body  `hcl:",remain"`
	DefRange hcl.Range `hcl:",def_range"`
}

// check refuses the old place with a diagnostic saying where it went.
func (p *LegacyPromotion) check(sandbox string) hcl.Diagnostics {
	if p == nil {
		return nil
	}
	return hcl.Diagnostics{errDiag(p.DefRange, "The promotion block moved into config",
		fmt.Sprintf("Sandbox %q: the tool library's promotion block is an option of the backend that keeps the library: write it inside the sandbox's config block, config { promotion { policy = ... } }.", sandbox))}
}

// publish puts a backend's events on the host's bus, stamped with the
// sandbox's name.
func (s *Sandbox) publish(evs []shared.Event) {
	for _, ev := range evs {
		payload := map[string]any{}
		if len(ev.Payload) > 0 {
			if err := json.Unmarshal(ev.Payload, &payload); err != nil {
				payload = map[string]any{"raw": string(ev.Payload)}
			}
		}
		s.host.metrics.egress.observe(s.Name(), ev.Type, payload) // egress.go
		s.host.bus.Emit(ev.Type, s.Name(), payload)
	}
}

// MintToken mints a bearer token for an open session of a backend with
// SessionTools (shared.ErrNotSupported otherwise). Scope is shared.ScopeAgent
// or shared.ScopeOperator; ttl 0 is the backend's default (tier 2: 5 min, at
// most 10 min).
func (s *Sandbox) MintToken(ctx context.Context, sessionID, scope string, ttl time.Duration) (shared.MintTokenResponse, error) {
	var resp shared.MintTokenResponse
	call := s.beginSession(sessionID)
	defer call.end()
	err := s.sessionDo(ctx, call, "MintToken", func(p shared.Sandbox) error {
		st, ok := p.(shared.SessionTools)
		if !ok {
			return fmt.Errorf("sandbox %q: session tools: %w", s.Name(), shared.ErrNotSupported)
		}
		var err error
		resp, err = st.MintToken(ctx, shared.MintTokenRequest{SessionID: sessionID, Scope: scope, TTL: ttl})
		return err
	})
	return resp, err
}

// MintOperatorToken mints an operator-scope token for an open session: the
// original's mint_operator_token. Hand it only to operator code: it is what
// promote_tool and forget_tool require. The LLM-facing path (Execute) always
// carries agent-scope tokens the plugin mints itself.
func (s *Sandbox) MintOperatorToken(ctx context.Context, sessionID string, ttl time.Duration) (string, error) {
	r, err := s.MintToken(ctx, sessionID, shared.ScopeOperator, ttl)
	return r.Token, err
}

// CallSessionTool calls tool of an open session with token (args: any JSON
// object value, nil for none) and publishes the events it reports. A
// promoted tool runs under the sandbox's policy as it is now (its imports
// must still be allowed, else the call is refused with an error wrapping
// shared.ErrPermissionDenied and the tool is not run; the policy's limits
// apply), not the one it was promoted under. Every
// call is observed: the orqest.session_tool span, a metric, a log line and
// an audit record (EventSessionToolCall). A refused
// token is an error wrapping shared.ErrPermissionDenied.
func (s *Sandbox) CallSessionTool(ctx context.Context, sessionID, tool string, args any, token string) (json.RawMessage, error) {
	return s.CallSessionToolStream(ctx, sessionID, tool, args, token, nil)
}

// CallSessionToolStream is CallSessionTool that gives onChunk the stdout
// and stderr of the code a promoted tool runs as it writes them (nil:
// none). A plugin that streams no tool calls (no
// shared.SessionToolStreamer) is called without streaming and onChunk
// gets the result's streams when it ends, when the result is an
// execution. onChunk is called from one goroutine at a time and should
// not block.
func (s *Sandbox) CallSessionToolStream(ctx context.Context, sessionID, tool string, args any, token string, onChunk func(shared.OutputChunk)) (json.RawMessage, error) {
	raw := json.RawMessage("{}")
	if args != nil {
		b, err := json.Marshal(args)
		if err != nil {
			return nil, fmt.Errorf("call tool %s: arguments: %v: %w", tool, err, shared.ErrInvalidArgument)
		}
		raw = b
	}
	// A promoted tool runs under the policy in force now: the backend
	// refuses it when it was promoted with an import this policy no longer
	// allows, and runs it with this policy's limits. A policy every run
	// would refuse refuses the tool too.
	p := s.policy
	switch tool {
	case toollib.ToolListTools, toollib.ToolPromote, toollib.ToolForget: // run no code
	default:
		if err := p.checkDangerous(); err != nil {
			return nil, p.refused(err)
		}
		if err := p.checkUnreviewed(); err != nil {
			return nil, p.refused(err)
		}
	}
	pol := &shared.ToolPolicy{AllowedImports: s.AllowedImports(), Timeout: p.Timeout, MemoryMB: p.MemoryMB, MaxOutputBytes: p.MaxOutputBytes}
	// A tool's code runs under the policy's timeout: the call is bounded by
	// the host's clock for an execution of that timeout (wallclock.go), not
	// by the call timeout.
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = shared.DefaultTimeout
	}
	clock, err := s.clockFor(ctx, timeout)
	if err != nil {
		return nil, err
	}
	ctx, cancel := clock.context(ctx)
	defer cancel()
	var resp shared.CallToolResponse
	call := s.beginSession(sessionID)
	defer call.end()
	err = s.observeSessionTool(ctx, sessionID, tool, func(ctx context.Context) error {
		return s.sessionDo(ctx, call, "CallTool", func(p shared.Sandbox) error {
			st, ok := p.(shared.SessionTools)
			if !ok {
				return fmt.Errorf("sandbox %q: session tools: %w", s.Name(), shared.ErrNotSupported)
			}
			req := shared.CallToolRequest{SessionID: sessionID, Tool: tool, Arguments: raw, Token: token, Policy: pol}
			var err error
			if ts, ok := p.(shared.SessionToolStreamer); ok && onChunk != nil {
				resp, err = ts.CallToolStream(ctx, req, func(c shared.OutputChunk) error {
					onChunk(c)
					return nil
				})
				streamed := err == nil
				if errors.Is(err, shared.ErrNotSupported) && errors.Is(err, shared.ErrNotRun) {
					resp, err = st.CallTool(ctx, req) // the plugin streams no tool calls; nothing ran
				}
				if err == nil && !streamed {
					replayStreams(resp.Result, onChunk)
				}
				return err
			}
			resp, err = st.CallTool(ctx, req)
			if err == nil && onChunk != nil {
				replayStreams(resp.Result, onChunk)
			}
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	s.publish(resp.Events)
	if call.reopened {
		return markStateLost(resp.Result), nil
	}
	return resp.Result, nil
}

// markStateLost sets state_lost in a tool call's result when it is an
// execution (a promoted tool ran): the call ran in a session opened again
// under its id (sessions.go). Any other result is returned as it is.
func markStateLost(result json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(result, &fields) != nil || fields["success"] == nil {
		return result
	}
	fields["state_lost"] = json.RawMessage("true")
	b, err := json.Marshal(fields)
	if err != nil {
		return result
	}
	return b
}

// replayStreams gives onChunk the stdout and stderr of a tool call's
// result when it is an execution (a call that was not streamed).
func replayStreams(result json.RawMessage, onChunk func(shared.OutputChunk)) {
	var res shared.ExecutionResult
	if json.Unmarshal(result, &res) != nil {
		return
	}
	if res.Stdout != "" {
		onChunk(shared.OutputChunk{Stream: shared.StreamStdout, Data: []byte(res.Stdout)})
	}
	if res.Stderr != "" {
		onChunk(shared.OutputChunk{Stream: shared.StreamStderr, Data: []byte(res.Stderr)})
	}
}

// ListLibrary returns the tool library of the session's user (operator token).
func (s *Sandbox) ListLibrary(ctx context.Context, sessionID, operatorToken string, includeCode bool) (toollib.ListResult, error) {
	var lib toollib.ListResult
	args := map[string]any{}
	if includeCode {
		args["include_code"] = true
	}
	raw, err := s.CallSessionTool(ctx, sessionID, toollib.ToolListTools, args, operatorToken)
	if err != nil {
		return lib, err
	}
	if err := json.Unmarshal(raw, &lib); err != nil {
		return lib, fmt.Errorf("list_tools: malformed result: %v: %w", err, shared.ErrInternal)
	}
	return lib, nil
}

// PromoteTool promotes name (codeHash "" picks the pending or most recently
// used hash) in the session user's library; by is recorded as promoted_by.
func (s *Sandbox) PromoteTool(ctx context.Context, sessionID, operatorToken, name, codeHash, by string) (toollib.ChangeResult, error) {
	return s.libraryChange(ctx, sessionID, operatorToken, toollib.ToolPromote, map[string]any{"name": name, "code_hash": codeHash, "by": by})
}

// ForgetTool deletes name (every hash, or only codeHash) from the session
// user's library and unregisters it.
func (s *Sandbox) ForgetTool(ctx context.Context, sessionID, operatorToken, name, codeHash string) (toollib.ChangeResult, error) {
	return s.libraryChange(ctx, sessionID, operatorToken, toollib.ToolForget, map[string]any{"name": name, "code_hash": codeHash})
}

func (s *Sandbox) libraryChange(ctx context.Context, sessionID, tok, tool string, args map[string]any) (toollib.ChangeResult, error) {
	for k, v := range args {
		if v == "" {
			delete(args, k)
		}
	}
	var ch toollib.ChangeResult
	raw, err := s.CallSessionTool(ctx, sessionID, tool, args, tok)
	if err != nil {
		return ch, err
	}
	if err := json.Unmarshal(raw, &ch); err != nil {
		return ch, fmt.Errorf("%s: malformed result: %v: %w", tool, err, shared.ErrInternal)
	}
	return ch, nil
}

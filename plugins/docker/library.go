package docker

// The plugin side of the per-user tool library: the promotion
// policy (the `promotion {}` block of the plugin's config schema, in the
// config JSON as "promotion") goes to the runtime in the hello line; the
// library's events come back in each tool result's _meta and are handed to
// the host in ExecuteResponse.Events / CallToolResponse.Events; and
// SessionTools lets the host mint a token (MintToken) and call the session's other tools with it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/plugins/docker/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

var _ shared.SessionTools = (*Backend)(nil)

// DefaultOperatorTokenTTL is the lifetime of a token minted without a TTL.
const DefaultOperatorTokenTTL = 5 * time.Minute

// normalizePromotion fills the policy's defaults and checks it.
func (c *Config) normalizePromotion() error {
	p := toollib.Promotion{}
	if c.Promotion != nil {
		p = *c.Promotion
	}
	p, err := p.Normalize()
	if err != nil {
		var fe *shared.FieldError
		if errors.As(err, &fe) { // the attribute of the config's promotion block
			return fmt.Errorf("docker config: %w", &shared.FieldError{Field: "promotion." + fe.Field, Reason: fe.Reason})
		}
		return fmt.Errorf("docker config: %v: %w", err, shared.ErrInvalidArgument)
	}
	c.Promotion = &p
	return nil
}

// withPromotion adds the tool library's policy to the hello line.
func withPromotion(cfg Config, h rtproto.Hello) rtproto.Hello {
	h.Promotion = cfg.Promotion
	return h
}

// checkToolName checks ExecuteRequest.ToolName (empty: not a library call).
func checkToolName(name string) error {
	if name == "" {
		return nil
	}
	if err := rtproto.CheckToolName(name); err != nil {
		return fmt.Errorf("execute: %v: %w", err, shared.ErrInvalidArgument)
	}
	return nil
}

// eventsFromMeta converts the runtime's _meta events to shared events.
func eventsFromMeta(meta mcp.Meta) []shared.Event {
	raw, ok := meta[rtproto.MetaEvents]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var evs []struct {
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(b, &evs) != nil {
		return nil
	}
	out := make([]shared.Event, 0, len(evs))
	for _, e := range evs {
		if e.Type != "" {
			out = append(out, shared.Event{Type: e.Type, Payload: e.Payload})
		}
	}
	return out
}

func (b *Backend) openSession(id string) (*session, error) {
	if err := rtproto.CheckID("session_id", id); err != nil {
		return nil, fmt.Errorf("%v: %w", err, shared.ErrInvalidArgument)
	}
	b.mu.Lock()
	s := b.sessions[id]
	b.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("no open session %q (call Open first): %w", id, shared.ErrNotFound)
	}
	return s, nil
}

// MintToken mints a bearer token for an open session: scope "agent" or
// "operator", at most
// rtproto.MaxTokenTTL. The plugin itself only ever stamps agent scope on
// the calls it makes; operator scope exists only in tokens minted here, at
// the host's explicit request.
func (b *Backend) MintToken(_ context.Context, req shared.MintTokenRequest) (shared.MintTokenResponse, error) {
	s, err := b.openSession(req.SessionID)
	if err != nil {
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: %w", err)
	}
	switch req.Scope {
	case shared.ScopeAgent, shared.ScopeOperator:
	default:
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: scope %q: want %q or %q: %w", req.Scope, shared.ScopeAgent, shared.ScopeOperator, shared.ErrInvalidArgument)
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = DefaultOperatorTokenTTL
	}
	if ttl < 0 || ttl > rtproto.MaxTokenTTL {
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: ttl %v: want (0, %v]: %w", ttl, rtproto.MaxTokenTTL, shared.ErrInvalidArgument)
	}
	tok, err := rtproto.Mint(s.secret, s.user, s.id, req.Scope, ttl)
	if err != nil {
		return shared.MintTokenResponse{}, fmt.Errorf("mint token: %v: %w", err, shared.ErrInternal)
	}
	b.logger.Info("token minted", "session", s.id, "user", s.user, "scope", req.Scope, "ttl", ttl)
	return shared.MintTokenResponse{Token: tok, ExpiresAt: time.Now().Add(ttl)}, nil
}

// CallTool calls a tool of the session's runtime with the caller's token
// (never one the plugin mints): the library's list_tools, promote_tool,
// forget_tool (operator scope), runtime_info, or a promoted tool (agent
// scope). A refused token is shared.ErrPermissionDenied.
func (b *Backend) CallTool(ctx context.Context, req shared.CallToolRequest) (shared.CallToolResponse, error) {
	s, err := b.openSession(req.SessionID)
	if err != nil {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: %w", err)
	}
	if req.Tool == rtproto.ToolExecute {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: use Execute for %s: %w", rtproto.ToolExecute, shared.ErrInvalidArgument)
	}
	if req.Tool != rtproto.ToolInfo && req.Tool != toollib.ToolListTools && req.Tool != toollib.ToolPromote && req.Tool != toollib.ToolForget {
		if err := rtproto.CheckToolName(req.Tool); err != nil {
			return shared.CallToolResponse{}, fmt.Errorf("call tool: %v: %w", err, shared.ErrInvalidArgument)
		}
	}
	if len(req.Arguments) > MaxArgsBytes {
		return shared.CallToolResponse{}, fmt.Errorf("call tool: arguments are %d bytes, over %d: %w", len(req.Arguments), MaxArgsBytes, shared.ErrInvalidArgument)
	}
	args := json.RawMessage("{}")
	if len(req.Arguments) > 0 && string(req.Arguments) != "null" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(req.Arguments, &obj); err != nil {
			return shared.CallToolResponse{}, fmt.Errorf("call tool: arguments must be a JSON object: %v: %w", err, shared.ErrInvalidArgument)
		}
		args = req.Arguments
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	meta := mcp.Meta{rtproto.MetaAuthorization: "Bearer " + req.Token}
	if p := req.Policy; p != nil {
		imports := p.AllowedImports
		if imports == nil {
			imports = []string{}
		}
		meta[rtproto.MetaPolicy] = rtproto.ToolPolicy{AllowedImports: imports, TimeoutS: p.Timeout.Seconds(), MemoryMB: p.MemoryMB, MaxOutputBytes: p.MaxOutputBytes}
	}
	out, err := s.mcp.CallTool(cctx, &mcp.CallToolParams{
		Meta:      meta,
		Name:      req.Tool,
		Arguments: args,
	})
	if err != nil {
		if s.dead() {
			return shared.CallToolResponse{}, fmt.Errorf("call tool %s: the session container %s is gone: %v: %w", req.Tool, s.name, err, shared.ErrUnavailable)
		}
		if ctx.Err() != nil {
			return shared.CallToolResponse{}, fmt.Errorf("call tool %s: %w", req.Tool, ctx.Err())
		}
		// An unknown tool is a protocol error in MCP.
		return shared.CallToolResponse{}, fmt.Errorf("call tool %s: %v: %w", req.Tool, err, shared.ErrNotFound)
	}
	if out.IsError {
		return shared.CallToolResponse{}, fmt.Errorf("call tool %s: %w", req.Tool, toolErr(out))
	}
	var text string
	for _, c := range out.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = tc.Text
			break
		}
	}
	if !json.Valid([]byte(text)) {
		return shared.CallToolResponse{}, fmt.Errorf("call tool %s: the runtime's result is not JSON: %w", req.Tool, shared.ErrInternal)
	}
	return shared.CallToolResponse{Result: json.RawMessage(text), Events: eventsFromMeta(out.Meta)}, nil
}

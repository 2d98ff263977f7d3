package host

// The host side of a per-user tool library (tier 2): the
// `promotion {}` block of a sandbox, the backend's events on the host bus,
// operator tokens (MintOperatorToken) and the operator
// calls list_tools / promote_tool / forget_tool.
//
// The promotion block is decoded by the host (typed, with source ranges)
// rather than by a plugin's config schema: a tool library is a capability
// of the contract (shared/toollib), not an option of one backend, so every
// backend that keeps one (tier 2 today, any later session tier through the
// same runtime) takes the same block, as Terraform's `lifecycle` block is
// the same for every resource. A plugin takes it only if it declares the
// tool_library capability; the host then hands it to the plugin as a
// toollib.Promotion inside its config JSON under the key "promotion":
//
//	sandbox "docker" {
//	  plugin = "docker"
//	  config { image = "orqest/agent-runtime:0.1.0" }
//	  promotion {
//	    policy                = "threshold"   # | "eager" | "operator_approval"
//	    threshold             = 3             # successes of one (name, code hash)
//	    demote_after_failures = 5             # 0: never
//	  }
//	}

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

// A per-user tool library's events (toollib.Event*), reported by the
// backend in ExecuteResponse.Events and CallToolResponse.Events, are
// published on the host's bus with the sandbox's name.

// PromotionConfig is a sandbox's `promotion {}` block.
type PromotionConfig struct {
	Policy              *string `hcl:"policy,optional"`
	Threshold           *int    `hcl:"threshold,optional"`
	DemoteAfterFailures *int    `hcl:"demote_after_failures,optional"`

	DefRange            hcl.Range `hcl:",def_range"`
	PolicyRange         hcl.Range `hcl:"policy,attr_value_range"`
	ThresholdRange      hcl.Range `hcl:"threshold,attr_value_range"`
	DemoteAfterFailRnge hcl.Range `hcl:"demote_after_failures,attr_value_range"`
}

func (p *PromotionConfig) check() hcl.Diagnostics {
	if p == nil {
		return nil
	}
	var diags hcl.Diagnostics
	if p.Policy != nil {
		switch *p.Policy {
		case toollib.PolicyThreshold, toollib.PolicyEager, toollib.PolicyOperatorApproval:
		default:
			diags = append(diags, errDiag(p.PolicyRange, "Unknown promotion policy",
				fmt.Sprintf("Promotion policy %q: want %q (promote after `threshold` successes, default 3), %q (every success) or %q (a tool.promotion_pending event; an operator promotes).",
					*p.Policy, toollib.PolicyThreshold, toollib.PolicyEager, toollib.PolicyOperatorApproval)))
		}
	}
	if p.Threshold != nil {
		if *p.Threshold < 1 || *p.Threshold > 1_000_000 {
			diags = append(diags, errDiag(p.ThresholdRange, "Invalid promotion threshold",
				fmt.Sprintf("threshold = %d: want a count of successful invocations from 1 to 1000000.", *p.Threshold)))
		} else if p.Policy != nil && *p.Policy == toollib.PolicyEager && *p.Threshold != 1 {
			diags = append(diags, errDiag(p.ThresholdRange, "Threshold with the eager policy",
				"The eager policy promotes on every success; remove threshold or use policy = \"threshold\"."))
		}
	}
	if p.DemoteAfterFailures != nil && (*p.DemoteAfterFailures < 0 || *p.DemoteAfterFailures > 1_000_000) {
		diags = append(diags, errDiag(p.DemoteAfterFailRnge, "Invalid demote_after_failures",
			fmt.Sprintf("demote_after_failures = %d: want 0 (never) or a count of consecutive failures.", *p.DemoteAfterFailures)))
	}
	return diags
}

// addPromotion adds the sandbox's promotion block to the plugin's config
// JSON (key "promotion"), or refuses it when the plugin keeps no library.
func addPromotion(sb *SandboxConfig, pluginName string, info shared.InfoResponse, cfg json.RawMessage, diags hcl.Diagnostics) (json.RawMessage, hcl.Diagnostics) {
	p := sb.Promotion
	if p == nil || diags.HasErrors() {
		return cfg, diags
	}
	if !info.Has(shared.CapToolLibrary) {
		return nil, append(diags, errDiag(p.DefRange, "Plugin keeps no tool library",
			fmt.Sprintf("Sandbox %q: plugin %q does not declare the %q capability, so a promotion block has no effect. Remove it or use a session tier that keeps a per-user tool library (docker).", sb.Name, pluginName, shared.CapToolLibrary)))
	}
	obj := map[string]json.RawMessage{}
	if len(cfg) > 0 {
		if err := json.Unmarshal(cfg, &obj); err != nil {
			return nil, append(diags, errDiag(p.DefRange, "Cannot encode config block", err.Error()))
		}
	}
	var m toollib.Promotion
	if p.Policy != nil {
		m.Policy = *p.Policy
	}
	if p.Threshold != nil {
		m.Threshold = *p.Threshold
	}
	if p.DemoteAfterFailures != nil {
		m.DemoteAfterFailures = *p.DemoteAfterFailures
	}
	b, _ := json.Marshal(m)
	obj["promotion"] = b
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, append(diags, errDiag(p.DefRange, "Cannot encode config block", err.Error()))
	}
	return out, diags
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
		s.host.bus.Emit(ev.Type, s.Name(), payload)
	}
}

// MintToken mints a bearer token for an open session of a backend with
// SessionTools (shared.ErrNotSupported otherwise). Scope is shared.ScopeAgent
// or shared.ScopeOperator; ttl 0 is the backend's default (tier 2: 5 min, at
// most 10 min).
func (s *Sandbox) MintToken(ctx context.Context, sessionID, scope string, ttl time.Duration) (shared.MintTokenResponse, error) {
	var resp shared.MintTokenResponse
	err := s.inst.do(ctx, "MintToken", func(p shared.Sandbox) error {
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
			return nil, err
		}
		if err := p.checkUnreviewed(); err != nil {
			return nil, err
		}
	}
	pol := &shared.ToolPolicy{AllowedImports: s.AllowedImports(), Timeout: p.Timeout, MemoryMB: p.MemoryMB, MaxOutputBytes: p.MaxOutputBytes}
	var resp shared.CallToolResponse
	err := s.observeSessionTool(ctx, sessionID, tool, func(ctx context.Context) error {
		return s.inst.do(ctx, "CallTool", func(p shared.Sandbox) error {
			st, ok := p.(shared.SessionTools)
			if !ok {
				return fmt.Errorf("sandbox %q: session tools: %w", s.Name(), shared.ErrNotSupported)
			}
			var err error
			resp, err = st.CallTool(ctx, shared.CallToolRequest{SessionID: sessionID, Tool: tool, Arguments: raw, Token: token, Policy: pol})
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	s.publish(resp.Events)
	return resp.Result, nil
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

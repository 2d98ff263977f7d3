// Package toollib is the contract of a per-user tool library, the
// capability a session backend declares as shared.CapToolLibrary: the
// library's operator tools and their arguments and results, its entries,
// its promotion policy and the events it reports. The host (which decodes a
// sandbox's promotion block and calls the operator tools) and every backend
// that keeps a library (the tier-2 runtime) share these types, so the two
// sides cannot drift.
//
// A backend counts successful invocations per (tool name, code hash) and
// promotes a tool by policy; a promoted tool is a first-class MCP tool of
// the user's sessions.
package toollib

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/orqest/sandbox/shared"
)

// Library tools a backend serves. All three need operator scope.
const (
	ToolListTools = "list_tools"
	ToolPromote   = "promote_tool"
	ToolForget    = "forget_tool"
)

// Event types the library reports.
const (
	EventPromotionPending   = "tool.promotion_pending"
	EventPromoted           = "tool.promoted"
	EventForgotten          = "tool.forgotten"
	EventDemoted            = "tool.demoted"
	EventLibraryUnavailable = "tool.library_unavailable"
	// EventLibraryRepaired: the backend found its library damaged (wrong
	// owner or mode, missing directory, a corrupt database) and repaired
	// it; the payload names what it changed ("repairs"), the problem
	// ("error") and where a corrupt database was moved ("moved_to").
	EventLibraryRepaired = "tool.library_repaired"
)

// Event is one library event, as carried in _meta[MetaEvents].
type Event struct {
	Type    string         `json:"type"`
	Payload map[string]any `json:"payload"`
}

// Promotion policies.
const (
	PolicyThreshold        = "threshold"
	PolicyEager            = "eager"
	PolicyOperatorApproval = "operator_approval"
	DefaultThreshold       = 3
)

// Promotion is a backend's `promotion {}` block: when an invocation of a
// (name, code hash) promotes it.
type Promotion struct {
	// Policy is "threshold" (default), "eager" or "operator_approval".
	Policy string `json:"policy,omitempty"`
	// Threshold is the number of successful invocations of the same name
	// and hash that promote it ("threshold", default 3) or make it pending
	// ("operator_approval", default 1).
	Threshold int `json:"threshold,omitempty"`
	// DemoteAfterFailures demotes a promoted tool after this many
	// consecutive failed invocations (0: never).
	DemoteAfterFailures int `json:"demote_after_failures,omitempty"`
}

// Schema is the `promotion {}` block of a session backend's config schema
// (what NormalizeBlock reads).
func Schema() shared.ConfigAttribute {
	return shared.ConfigAttribute{Name: "promotion", Type: shared.ConfigBlock, Description: "the per-user tool library's promotion policy", Attributes: []shared.ConfigAttribute{
		{Name: "policy", Type: "string", Description: `"threshold" (default: promote after threshold successes of the same name and code), "eager" (every success) or "operator_approval" (a tool.promotion_pending event; an operator promotes)`},
		{Name: "threshold", Type: "number", Description: fmt.Sprintf("successful invocations that promote a tool (threshold, default %d) or make it pending (operator_approval, default 1)", DefaultThreshold)},
		{Name: "demote_after_failures", Type: "number", Description: "demote a promoted tool after this many consecutive failures (default 0: never)"},
	}}
}

// NormalizeBlock is Normalize for a plugin config's `promotion {}` block
// (nil: the defaults): a *shared.FieldError names the attribute as
// "promotion.<attribute>", so the host points at it.
func NormalizeBlock(p *Promotion) (*Promotion, error) {
	var in Promotion
	if p != nil {
		in = *p
	}
	out, err := in.Normalize()
	if err != nil {
		var fe *shared.FieldError
		if errors.As(err, &fe) {
			return nil, &shared.FieldError{Field: "promotion." + fe.Field, Reason: fe.Reason}
		}
		return nil, fmt.Errorf("promotion: %v: %w", err, shared.ErrInvalidArgument)
	}
	return &out, nil
}

// Normalize fills defaults and checks the values. An error is a
// *shared.FieldError naming the attribute at fault ("policy", "threshold",
// "demote_after_failures").
func (p Promotion) Normalize() (Promotion, error) {
	if p.Policy == "" {
		p.Policy = PolicyThreshold
	}
	switch p.Policy {
	case PolicyThreshold:
		if p.Threshold == 0 {
			p.Threshold = DefaultThreshold
		}
	case PolicyOperatorApproval:
		if p.Threshold == 0 {
			p.Threshold = 1
		}
	case PolicyEager:
		if p.Threshold != 0 && p.Threshold != 1 {
			return p, &shared.FieldError{Field: "threshold", Reason: fmt.Sprintf("threshold = %d with the eager policy, which promotes on every success: remove threshold or use policy = %q", p.Threshold, PolicyThreshold)}
		}
		p.Threshold = 1
	default:
		return p, &shared.FieldError{Field: "policy", Reason: fmt.Sprintf("promotion policy %q: want %q (promote after `threshold` successes, default %d), %q (every success) or %q (a tool.promotion_pending event; an operator promotes)",
			p.Policy, PolicyThreshold, DefaultThreshold, PolicyEager, PolicyOperatorApproval)}
	}
	if p.Threshold < 1 || p.Threshold > 1_000_000 {
		return p, &shared.FieldError{Field: "threshold", Reason: fmt.Sprintf("threshold = %d: want a count of successful invocations from 1 to 1000000", p.Threshold)}
	}
	if p.DemoteAfterFailures < 0 || p.DemoteAfterFailures > 1_000_000 {
		return p, &shared.FieldError{Field: "demote_after_failures", Reason: fmt.Sprintf("demote_after_failures = %d: want 0 (never) or a count of consecutive failures up to 1000000", p.DemoteAfterFailures)}
	}
	return p, nil
}

// Statuses of a library entry.
const (
	StatusCandidate = "candidate" // counted, not promoted
	StatusPending   = "pending"   // operator_approval: waiting for promote_tool
	StatusPromoted  = "promoted"  // a first-class MCP tool
	StatusDemoted   = "demoted"   // was promoted; failed too often (promote_tool re-promotes)
)

// Entry is one (name, code hash) of the library, as list_tools returns it.
type Entry struct {
	Name                string   `json:"name"`
	CodeHash            string   `json:"code_hash"`
	Status              string   `json:"status"`
	Code                string   `json:"code,omitempty"`
	AllowedImports      []string `json:"allowed_imports"`
	Successes           int64    `json:"successes"`
	Failures            int64    `json:"failures"`
	ConsecutiveFailures int64    `json:"consecutive_failures"`
	MeanMS              float64  `json:"mean_ms"`
	LastMS              float64  `json:"last_ms"`
	FirstSeen           string   `json:"first_seen"`
	LastUsed            string   `json:"last_used"`
	PromotedBy          string   `json:"promoted_by,omitempty"`
	PromotedAt          string   `json:"promoted_at,omitempty"`
	DemotedAt           string   `json:"demoted_at,omitempty"`
	LastError           string   `json:"last_error,omitempty"`
}

// ListArgs are the arguments of list_tools.
type ListArgs struct {
	IncludeCode bool `json:"include_code,omitempty"`
}

// ListResult is the result of list_tools.
type ListResult struct {
	User   string    `json:"user"`
	Path   string    `json:"path"`
	Policy Promotion `json:"policy"`
	Tools  []Entry   `json:"tools"`
}

// PromoteArgs are the arguments of promote_tool. CodeHash may be omitted
// when the name has one candidate (or to take the most recently used one).
type PromoteArgs struct {
	Name     string `json:"name"`
	CodeHash string `json:"code_hash,omitempty"`
	By       string `json:"by,omitempty"` // who approves; recorded as promoted_by ("operator" when empty)
}

// ForgetArgs are the arguments of forget_tool: every hash of Name, or only
// CodeHash.
type ForgetArgs struct {
	Name     string `json:"name"`
	CodeHash string `json:"code_hash,omitempty"`
}

// ChangeResult is the result of promote_tool and forget_tool.
type ChangeResult struct {
	Name    string  `json:"name"`
	Changed int     `json:"changed"`
	Entry   *Entry  `json:"entry,omitempty"`
	Events  []Event `json:"events,omitempty"`
	Message string  `json:"message,omitempty"`
}

// CodeHash is the hash that, with the name, identifies a tool: the
// SHA-256 of its code.
func CodeHash(code string) string {
	s := sha256.Sum256([]byte(code))
	return hex.EncodeToString(s[:])
}

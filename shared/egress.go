package shared

// EgressPolicy is a sandbox's `network {}` block as the host hands it to
// its backend (ConfigureRequest.Egress): the outbound connections a
// session may open, through an egress proxy the backend runs outside the
// session, and nothing else. A backend that enforces it declares
// CapEgress; the host refuses a network block on any other.
//
// The entries are as the operator wrote them; package egress parses them
// (egress.ParsePolicy), and the host has already refused malformed ones.
type EgressPolicy struct {
	// Name says where the policy comes from, e.g. `sandbox "docker"
	// network {}`: every refusal names it.
	Name string `json:"name"`
	// Allow lists host names with an optional port ("api.example.com:443"),
	// `*.` wildcards ("*.internal.example"), addresses and CIDRs with an
	// optional port ("10.0.0.0/8:5432").
	Allow []string `json:"allow,omitempty"`
	// Deny lists entries of the same forms that are refused even when an
	// Allow entry matches.
	Deny []string `json:"deny,omitempty"`
	// BudgetBytes caps the bytes one session sends and receives in all
	// (0: no cap).
	BudgetBytes int64 `json:"budget_bytes,omitempty"`
	// MaxConnections caps one session's connections open at once (0: the
	// backend's default, egress.DefaultMaxConns).
	MaxConnections int `json:"max_connections,omitempty"`
}

package host

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/shared"
)

// NetworkConfig is a sandbox's `network {}` block: the outbound
// connections its sessions may open, through the backend's egress proxy.
// Without the block a sandbox has no network at all.
//
//	network {
//	  allow           = ["api.example.com:443", "*.internal.example", "10.0.0.0/8:5432"]
//	  deny            = ["secret.internal.example"]   # wins over allow
//	  budget_bytes    = 10485760                      # per session, both ways
//	  max_connections = 32                            # per session, open at once
//	}
//
// The entries are parsed once, when the policy is read (egress.ParseRule);
// a malformed one is a diagnostic at the entry itself.
type NetworkConfig struct {
	Allow          *hcl.Attribute `hcl:"allow,optional"`
	Deny           *hcl.Attribute `hcl:"deny,optional"`
	BudgetBytes    *int64         `hcl:"budget_bytes,optional"`
	MaxConnections *int           `hcl:"max_connections,optional"`

	DefRange            hcl.Range `hcl:",def_range"`
	BudgetBytesRange    hcl.Range `hcl:"budget_bytes,attr_value_range"`
	MaxConnectionsRange hcl.Range `hcl:"max_connections,attr_value_range"`

	// resolved is the checked block (check fills it in).
	resolved *shared.EgressPolicy
	policy   egress.Policy
}

// check parses the block's entries and limits, reporting every bad one at
// its own range, and keeps the result for SandboxEgress.
func (n *NetworkConfig) check(sandbox string) hcl.Diagnostics {
	if n == nil {
		return nil
	}
	var diags hcl.Diagnostics
	out := &shared.EgressPolicy{Name: fmt.Sprintf("sandbox %q network {}", sandbox)}
	var rules [2][]egress.Rule
	for i, a := range []*hcl.Attribute{n.Allow, n.Deny} {
		entries, rs, d := networkEntries(a)
		diags = append(diags, d...)
		rules[i] = rs
		if i == 0 {
			out.Allow = entries
		} else {
			out.Deny = entries
		}
	}
	if n.Allow == nil || len(out.Allow) == 0 {
		if !diags.HasErrors() {
			diags = append(diags, errDiag(n.DefRange, "Network block allows nothing",
				fmt.Sprintf(`Sandbox %q has a network block without allow entries: list what its sessions may reach, e.g. allow = ["api.example.com:443"], or remove the block for no network at all.`, sandbox)))
		}
	}
	if n.BudgetBytes != nil {
		if *n.BudgetBytes <= 0 {
			diags = append(diags, errDiag(n.BudgetBytesRange, "Invalid limit",
				fmt.Sprintf("budget_bytes must be a positive number of bytes, not %d; leave it out for no budget.", *n.BudgetBytes)))
		} else {
			out.BudgetBytes = *n.BudgetBytes
		}
	}
	positiveLimit(&diags, "max_connections", n.MaxConnections, n.MaxConnectionsRange, "a positive number")
	if n.MaxConnections != nil && *n.MaxConnections > 0 {
		out.MaxConnections = *n.MaxConnections
	}
	if diags.HasErrors() {
		return diags
	}
	n.resolved = out
	n.policy = egress.Policy{Name: out.Name, Allow: rules[0], Deny: rules[1], BudgetBytes: out.BudgetBytes, MaxConns: out.MaxConnections}
	return diags
}

// networkEntries decodes a list of strings and parses each entry, with a
// diagnostic at the entry's own range (file:line:col of the string).
func networkEntries(a *hcl.Attribute) ([]string, []egress.Rule, hcl.Diagnostics) {
	if a == nil {
		return nil, nil, nil
	}
	exprs, d := hcl.ExprList(a.Expr)
	if d.HasErrors() {
		return nil, nil, hcl.Diagnostics{errDiag(a.Expr.Range(), "Invalid network entries",
			fmt.Sprintf("%s must be a list of strings such as [\"api.example.com:443\", \"10.0.0.0/8\"].", a.Name))}
	}
	var diags hcl.Diagnostics
	var entries []string
	var rules []egress.Rule
	for _, e := range exprs {
		v, d := e.Value(nil)
		if d.HasErrors() {
			diags = append(diags, d...)
			continue
		}
		s, err := convert.Convert(v, cty.String)
		if err != nil || s.IsNull() || !s.IsKnown() {
			diags = append(diags, errDiag(e.Range(), "Invalid network entry",
				fmt.Sprintf("%s entries are strings such as \"api.example.com:443\".", a.Name)))
			continue
		}
		r, err := egress.ParseRule(s.AsString())
		if err != nil {
			diags = append(diags, errDiag(e.Range(), "Invalid network entry", fmt.Sprintf("%s: %v.", a.Name, err)))
			continue
		}
		entries = append(entries, r.Entry)
		rules = append(rules, r)
	}
	return entries, rules, diags
}

// SandboxEgress returns the sandbox's checked network block for its
// backend (ConfigureRequest.Egress), nil when it has none.
func (c *Config) SandboxEgress(s *SandboxConfig) *shared.EgressPolicy {
	if s.Network == nil || s.Network.resolved == nil {
		return nil
	}
	cp := *s.Network.resolved
	return &cp
}

// SandboxNetwork returns the sandbox's parsed network rules, for `policy
// check` to say what they allow; false when it has no network block.
func (c *Config) SandboxNetwork(s *SandboxConfig) (egress.Policy, bool) {
	if s.Network == nil || s.Network.resolved == nil {
		return egress.Policy{}, false
	}
	return s.Network.policy, true
}

// checkEgress refuses a network block on a backend that does not enforce
// egress rules (no shared.CapEgress): its sessions would have no network,
// or all of it, rather than what the block says.
func (in *instance) checkEgress(info shared.InfoResponse) error {
	if in.sb.Network == nil || info.Has(shared.CapEgress) {
		return nil
	}
	return &DiagnosticsError{Files: in.host.cfg.Files, Diagnostics: hcl.Diagnostics{errDiag(in.sb.Network.DefRange, "Egress rules not supported",
		fmt.Sprintf("Sandbox %q has a network block, but plugin %q cannot enforce egress rules (no %q capability): remove the block (no network at all) or use a backend that routes sessions through an egress proxy, such as docker with network = %q.", in.sb.Name, in.entry.Name, shared.CapEgress, "none"))}}
}

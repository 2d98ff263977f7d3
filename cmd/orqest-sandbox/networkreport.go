package main

import (
	"fmt"
	"io"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/host"
)

// networkReport is what one sandbox's network {} block lets its sessions
// reach, as `policy check` explains it: each entry in words.
type networkReport struct {
	Allow          []string `json:"allow"`
	Deny           []string `json:"deny,omitempty"`
	BudgetBytes    int64    `json:"budget_bytes,omitempty"`
	MaxConnections int      `json:"max_connections"`
}

// networkReports describes every sandbox that has a network block.
func networkReports(cfg *host.Config) map[string]networkReport {
	out := map[string]networkReport{}
	for _, s := range cfg.Sandboxes {
		pol, ok := cfg.SandboxNetwork(s)
		if !ok {
			continue
		}
		r := networkReport{BudgetBytes: pol.BudgetBytes, MaxConnections: pol.MaxConns}
		if r.MaxConnections == 0 {
			r.MaxConnections = egress.DefaultMaxConns
		}
		for _, a := range pol.Allow {
			r.Allow = append(r.Allow, a.String())
		}
		for _, d := range pol.Deny {
			r.Deny = append(r.Deny, d.String())
		}
		out[s.Name] = r
	}
	return out
}

// writeNetworkReport prints, for every sandbox, what its sessions may
// reach: nothing without a network block, else each entry and the limits.
func writeNetworkReport(w io.Writer, sandboxes []string, reps map[string]networkReport) {
	fmt.Fprintln(w, "network:")
	for _, name := range sandboxes {
		r, ok := reps[name]
		if !ok {
			fmt.Fprintf(w, "  sandbox %s: none (no network block)\n", name)
			continue
		}
		budget := "no budget_bytes"
		if r.BudgetBytes > 0 {
			budget = fmt.Sprintf("budget_bytes %d", r.BudgetBytes)
		}
		fmt.Fprintf(w, "  sandbox %s: through the egress proxy only (%s, max_connections %d per session); deny wins over allow\n", name, budget, r.MaxConnections)
		for _, a := range r.Allow {
			fmt.Fprintf(w, "    allow %s\n", a)
		}
		for _, d := range r.Deny {
			fmt.Fprintf(w, "    deny  %s\n", d)
		}
		fmt.Fprintf(w, "    names resolving to loopback, link-local, multicast, unspecified or metadata addresses are refused unless an address entry lists them\n")
	}
}

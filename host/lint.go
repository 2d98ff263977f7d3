package host

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
)

// DangerousImports returns the modules that hand user code OS, process,
// file, network, introspection or code-loading power, each with why. The
// list lives once, in the rules table (package rules,
// "dangerous_imports"); the runner reads the same list. A name matches a
// module and its submodules ("os" covers "os.path").
func DangerousImports() map[string]string { return rules.Default().Dangerous() }

// dangerousWhy reports whether module m (or a package above it) is
// dangerous, and why.
func dangerousWhy(m string) (string, bool) {
	dangerous := rules.Default().DangerousImports
	for name := m; name != ""; {
		if why, ok := dangerous[name]; ok {
			return why, true
		}
		i := strings.LastIndexByte(name, '.')
		if i < 0 {
			break
		}
		name = name[:i]
	}
	return "", false
}

// acknowledged reports whether allow_dangerous_imports covers module m
// (an entry names m or a package above it), or the sandbox's network {}
// block does (m is one of rules.json egress_modules, which the runner
// serves through the egress proxy).
func (p Policy) acknowledged(m string) bool {
	if p.Network && slices.Contains(rules.Default().EgressModules, m) {
		return true
	}
	for _, a := range p.AllowDangerousImports {
		if a == m || strings.HasPrefix(m, a+".") {
			return true
		}
	}
	return false
}

// UnacknowledgedDangerous returns the modules of the call's allowlist
// (the policy's allowed_imports plus extra) that are dangerous and not
// acknowledged by allow_dangerous_imports, sorted. Execute refuses a call
// when it is not empty.
func (p Policy) UnacknowledgedDangerous(extra ...string) []string {
	var bad []string
	for _, m := range p.Allowed(extra...) {
		if _, ok := dangerousWhy(m); ok && !p.acknowledged(m) {
			bad = append(bad, m)
		}
	}
	return bad
}

// refused is err as the policy's refusal of a request (*PolicyError).
func (p Policy) refused(err error) error { return &PolicyError{Policy: p.Name, Err: err} }

// checkDangerous is the run-time half of the lint: an error wrapping
// shared.ErrFailedPrecondition when the call would allow a dangerous
// module the policy did not acknowledge.
func (p Policy) checkDangerous(extra ...string) error {
	bad := p.UnacknowledgedDangerous(extra...)
	if len(bad) == 0 {
		return nil
	}
	var parts []string
	for _, m := range bad {
		why, _ := dangerousWhy(m)
		parts = append(parts, fmt.Sprintf("%s (%s)", m, why))
	}
	return fmt.Errorf("policy %q: refusing to run with dangerous allowed imports %s; list them in allow_dangerous_imports to allow them deliberately: %w",
		p.Name, strings.Join(parts, ", "), shared.ErrFailedPrecondition)
}

// reviewed reports whether module m has a reviewed surface in the rules
// table (its top-level package's entry decides for a dotted name whose own
// entry is missing: the runner refuses unreviewed submodules of reviewed
// packages itself).
func reviewed(m string) bool {
	t := rules.Default()
	return t.Reviewed(m) || t.Reviewed(strings.SplitN(m, ".", 2)[0])
}

// unreviewedAcknowledged reports whether allow_unreviewed_imports covers m.
func (p Policy) unreviewedAcknowledged(m string) bool {
	for _, a := range p.AllowUnreviewedImports {
		if a == m || strings.HasPrefix(m, a+".") {
			return true
		}
	}
	return false
}

// Unreviewed returns the modules of the call's allowlist that have no
// reviewed surface in the rules table (what importing them hands user code
// has not been checked), are not dangerous (those need
// allow_dangerous_imports instead) and are not acknowledged by
// allow_unreviewed_imports, sorted. Execute refuses a call when it is not
// empty.
func (p Policy) Unreviewed(extra ...string) []string {
	var bad []string
	for _, m := range p.Allowed(extra...) {
		if _, danger := dangerousWhy(m); danger || reviewed(m) || p.unreviewedAcknowledged(m) {
			continue
		}
		bad = append(bad, m)
	}
	sort.Strings(bad)
	return bad
}

// ReviewedModules returns the modules with a reviewed surface, sorted.
func ReviewedModules() []string {
	var out []string
	for m := range rules.Default().ModuleSurfaces {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// checkUnreviewed refuses a call that would allow an unreviewed module
// (an error wrapping shared.ErrFailedPrecondition).
func (p Policy) checkUnreviewed(extra ...string) error {
	bad := p.Unreviewed(extra...)
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("policy %q: refusing to run with %s in the allowed imports: no reviewed surface says what importing it hands user code; "+
		"use a reviewed module (%s), or list it in allow_unreviewed_imports to allow it deliberately: %w",
		p.Name, strings.Join(bad, ", "), strings.Join(ReviewedModules(), ", "), shared.ErrFailedPrecondition)
}

// importNeed is what importing a heavy module costs: resident memory of
// the interpreter once it is imported (MB) and the time of a cold import.
type importNeed struct {
	MB      int
	Seconds float64
}

// heavyImport returns what importing the data-science image's heavy
// module pkg needs, measured there on a 2-core machine (VmHWM and wall
// time of `import pkg` in a fresh interpreter, single-threaded native
// pools); false for any other module. A policy allowing one with less
// memory or a shorter timeout fails at the import.
func heavyImport(pkg string) (importNeed, bool) {
	switch pkg {
	case "numpy":
		return importNeed{MB: 32, Seconds: 1}, true
	case "pandas":
		return importNeed{MB: 75, Seconds: 3.5}, true
	case "matplotlib": // with pyplot, its reviewed submodule
		return importNeed{MB: 75, Seconds: 3}, true
	}
	return importNeed{}, false
}

// lintHeavyImports warns when policy p allows a heavy module with less
// memory or a shorter timeout than its import needs.
func lintHeavyImports(p *PolicyConfig, pol Policy) hcl.Diagnostics {
	var diags hcl.Diagnostics
	mb, secs, heavy := 0, 0.0, []string(nil)
	for _, m := range p.AllowedImports {
		need, ok := heavyImport(strings.SplitN(m, ".", 2)[0])
		if !ok {
			continue
		}
		heavy = append(heavy, m)
		mb, secs = max(mb, need.MB), max(secs, need.Seconds)
	}
	if len(heavy) == 0 {
		return nil
	}
	mods := strings.Join(heavy, ", ")
	if pol.MemoryMB > 0 && pol.MemoryMB < mb {
		r := p.MemoryMBRange
		if p.MemoryMB == nil {
			r = p.DefRange
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "memory_mb too small for the allowed imports",
			Detail: fmt.Sprintf("Policy %q allows %s, whose import needs about %d MB resident (measured on the data-science image), more than memory_mb = %d: the import fails. On a tier without a memory cgroup (tier 1: memory_mb is an address-space limit) it needs two to four times that.",
				p.Name, mods, mb, pol.MemoryMB),
			Subject: &r,
		})
	}
	if t := pol.Timeout.Seconds(); t > 0 && t < secs {
		r := p.TimeoutRange
		if p.Timeout == nil {
			r = p.DefRange
		}
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "timeout too short for the allowed imports",
			Detail: fmt.Sprintf("Policy %q allows %s, whose cold import takes about %.1f s (measured on a 2-core machine), longer than timeout = %s: a call that imports it first can time out. Session backends import the policy's modules before the first call; other tiers import them within the call.",
				p.Name, mods, secs, pol.Timeout),
			Subject: &r,
		})
	}
	return diags
}

// LintPolicy lints a policy and returns diagnostics with source ranges.
// Errors: dangerous modules in allowed_imports that allow_dangerous_imports
// does not acknowledge, and modules without a reviewed surface that
// allow_unreviewed_imports does not list — every run under such a policy is
// refused, so the policy is unusable as written. Warnings: dangerous
// modules allowed deliberately, allow_dangerous_imports entries that have
// no effect, heavy modules (numpy, pandas, matplotlib) allowed with less
// memory or a shorter timeout than their import needs, and sandboxes that
// opt out of isolation with unsafe = true.
func LintPolicy(cfg *Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, p := range cfg.Policies {
		pol := Policy{Name: p.Name, AllowedImports: p.AllowedImports, AllowDangerousImports: p.AllowDangerousImports,
			Network: networkOnly(cfg, p.Name)}
		var bad, acked []string
		for _, m := range p.AllowedImports {
			why, ok := dangerousWhy(m)
			if !ok {
				continue
			}
			if pol.acknowledged(m) {
				acked = append(acked, fmt.Sprintf("%s (%s)", m, why))
			} else {
				bad = append(bad, fmt.Sprintf("%s (%s)", m, why))
			}
		}
		sort.Strings(bad)
		sort.Strings(acked)
		r := p.AllowedImportsRange
		if len(bad) > 0 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Dangerous module in allowed_imports",
				Detail: fmt.Sprintf("Policy %q lets user code import %s. These hand out OS, process, file, network, introspection or code-loading power and defeat the sandbox's static checks; every run under this policy is refused until allow_dangerous_imports lists them (allow them only for trusted code) or allowed_imports drops them.",
					p.Name, strings.Join(bad, ", ")),
				Subject: &r,
			})
		}
		if len(acked) > 0 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Dangerous module allowed deliberately",
				Detail: fmt.Sprintf("Policy %q allows %s and acknowledges it with allow_dangerous_imports: code run under this policy is trusted code, not sandboxed code.",
					p.Name, strings.Join(acked, ", ")),
				Subject: &r,
			})
		}
		if resolved, ok := cfg.Policy(p.Name); ok {
			diags = append(diags, lintHeavyImports(p, resolved)...)
		}
		pol.AllowUnreviewedImports = p.AllowUnreviewedImports
		if un := pol.Unreviewed(); len(un) > 0 {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unreviewed module in allowed_imports",
				Detail: fmt.Sprintf("Policy %q lets user code import %s, which has no reviewed surface in the rules table (what importing it hands user code has not been checked); every run under this policy is refused until allow_unreviewed_imports lists it or allowed_imports drops it.",
					p.Name, strings.Join(un, ", ")),
				Subject: &r,
			})
		}
		var noop []string
		for _, a := range p.AllowDangerousImports {
			used := false
			for _, m := range p.AllowedImports {
				if _, ok := dangerousWhy(m); ok && (a == m || strings.HasPrefix(m, a+".")) {
					used = true
				}
			}
			if !used {
				noop = append(noop, a)
			}
		}
		if len(noop) > 0 {
			ar := p.AllowDangerousRange
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "allow_dangerous_imports entry has no effect",
				Detail: fmt.Sprintf("Policy %q acknowledges %s, which allowed_imports does not list as a dangerous module (a typo?). Calls may still add it with their own allowlist.",
					p.Name, strings.Join(noop, ", ")),
				Subject: &ar,
			})
		}
	}
	for _, s := range cfg.Sandboxes {
		if s.Unsafe {
			r := s.DefRange
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Sandbox without isolation",
				Detail:   fmt.Sprintf("Sandbox %q sets unsafe = true: a tier-0 backend runs code in its own process with no isolation. Use it for tests and trusted code only.", s.Name),
				Subject:  &r,
			})
		}
	}
	return diags
}

// networkOnly reports whether every sandbox that uses policy name has a
// network {} block (and one does): its egress modules are acknowledged
// wherever the policy runs.
func networkOnly(cfg *Config, name string) bool {
	n := 0
	for _, s := range cfg.Sandboxes {
		pn := s.Policy
		if pn == "" {
			pn = "default"
		}
		if pn != name {
			continue
		}
		if cfg.SandboxEgress(s) == nil {
			return false
		}
		n++
	}
	return n > 0
}

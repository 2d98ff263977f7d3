package validator

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync/atomic"
	"time"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
)

// Options are every input of a check besides the code and the rules table:
// what a Validator's verdict on a body depends on. A verdict carries their
// Digest, so a backend trusts the host's acceptance only when it would
// have checked with exactly these options.
//
// Digest encodes every field (it is the JSON of the whole struct), so a
// field added here is part of the digest without anyone remembering it;
// the package's tests refuse an unexported field, which the encoding
// would leave out.
type Options struct {
	MaxCodeBytes int
	MaxDepth     int
	Timeout      time.Duration
	// AllowedImports is the import allowlist as a set: sorted and without
	// duplicates.
	AllowedImports []string
	Features       Features
}

// Digest is the hex SHA-256 of o's JSON encoding.
func (o Options) Digest() string {
	b, err := json.Marshal(o)
	if err != nil {
		panic("validator: Options do not encode: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Options returns the options a check of a body under allowedImports and
// f runs with.
func (v *Validator) Options(allowedImports []string, f Features) Options {
	imps := slices.Clone(allowedImports)
	slices.Sort(imps)
	imps = slices.Compact(imps)
	if imps == nil {
		imps = []string{}
	}
	return Options{MaxCodeBytes: v.maxBytes, MaxDepth: v.maxDepth, Timeout: v.timeout, AllowedImports: imps, Features: f}
}

// verdictFor is the verdict on code accepted under o.
func verdictFor(code string, o Options) *shared.Verdict {
	return &shared.Verdict{CodeSHA256: sha256.Sum256([]byte(code)), Rules: rules.Version(), Options: o.Digest()}
}

// Accept is CheckWith that also returns, when the code is accepted, the
// verdict that says so (shared.ExecuteRequest.Verdict): the host sends it
// with the request so that the backend need not check the same body
// again. A rejection, or a check whose context ended, has no verdict.
func (v *Validator) Accept(ctx context.Context, code string, allowedImports []string, f Features) ([]shared.Finding, *shared.Verdict) {
	found := v.CheckWith(ctx, code, allowedImports, f)
	if len(found) > 0 || (ctx != nil && ctx.Err() != nil) {
		return found, nil
	}
	return nil, verdictFor(code, v.Options(allowedImports, f))
}

// Trusts reports whether verdict is exactly the one v would make on
// accepting code under allowedImports and f: the same code hash, rules
// version and options digest. A nil verdict is not trusted.
func (v *Validator) Trusts(verdict *shared.Verdict, code string, allowedImports []string, f Features) bool {
	if verdict == nil {
		return false
	}
	want := verdictFor(code, v.Options(allowedImports, f))
	return verdict.CodeSHA256 == want.CodeSHA256 && verdict.Rules == want.Rules && verdict.Options == want.Options
}

// CheckTrusting is the check of a backend's Execute: no findings and
// trusted true when v Trusts the verdict (the check is skipped), else
// CheckWith's findings.
func (v *Validator) CheckTrusting(ctx context.Context, code string, allowedImports []string, f Features, verdict *shared.Verdict) (findings []shared.Finding, trusted bool) {
	if v.Trusts(verdict, code, allowedImports, f) {
		v.stats.trusted.Add(1)
		return nil, true
	}
	return v.CheckWith(ctx, code, allowedImports, f), false
}

// Stats count a Validator's checks since New.
type Stats struct {
	// Checked counts the checks run (CheckWith and what calls it; a
	// cache hit counts).
	Checked uint64
	// Trusted counts the checks CheckTrusting skipped on a trusted verdict.
	Trusted uint64
}

type counters struct {
	checked, trusted atomic.Uint64
}

// Stats returns v's counts.
func (v *Validator) Stats() Stats {
	return Stats{Checked: v.stats.checked.Load(), Trusted: v.stats.trusted.Load()}
}

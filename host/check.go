package host

import (
	"context"
	"fmt"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// CheckCode runs the static checks of the host on code under policy p (its
// allowlist plus extra) without any plugin: code larger than max_code_bytes
// is a single "code-too-large" finding, anything else is up to checker
// (validator.New() when nil). No findings means accepted.
func CheckCode(ctx context.Context, checker StaticChecker, p Policy, code string, extra ...string) []shared.Finding {
	if len(code) > p.MaxCodeBytes {
		return []shared.Finding{{
			Rule:    "code-too-large",
			Message: fmt.Sprintf("code is %d bytes; policy %q allows at most %d (max_code_bytes)", len(code), p.Name, p.MaxCodeBytes),
			Line:    1,
			Column:  1,
		}}
	}
	if checker == nil {
		checker = validator.New()
	}
	return checker.CheckWith(ctx, code, p.Allowed(extra...), validator.Features{Classes: p.Classes})
}

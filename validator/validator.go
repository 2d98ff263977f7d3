// Package validator holds the static checks every tier runs before code is
// executed, and the one rules table (rules.json) that both this Go checker and
// the in-child CPython checker read.
package validator

import (
	"context"
	_ "embed"

	"github.com/orqest/sandbox/shared"
)

//go:embed rules.json
var rulesJSON []byte

// RulesJSON returns the rules table, the single source of truth shared with
// the Python runner's in-child checker.
func RulesJSON() []byte { return rulesJSON }

// Validator checks Python function bodies. It is safe for concurrent use.
type Validator struct{}

// New returns a Validator.
func New() *Validator { return &Validator{} }

// Check returns every finding for code under the given import allowlist. An
// empty result means the code is accepted. (STUB: being implemented.)
func (v *Validator) Check(ctx context.Context, code string, allowedImports []string) []shared.Finding {
	return nil
}

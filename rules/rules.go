// Package rules holds the one rules table every orqest-sandbox checker reads
// (rules.json), the in-child CPython checker that reads it (checker.py), and
// the one typed decoder every Go reader of the table uses.
//
// The Go validator (package validator), the host's policy lint, the backends
// and the Python child all read this table; nothing else lists a forbidden
// name, a dangerous module or a validation limit. The package is cgo-free and
// imports only the standard library, so the in-container runtime embeds it.
package rules

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

//go:embed rules.json
var tableJSON []byte

//go:embed checker.py
var checkerPy string

// JSON returns the rules table as the bytes the Python child receives. The
// caller must not modify them.
func JSON() []byte { return tableJSON }

// CheckerPy returns the source of the in-child checker (_orq_check), which
// the runner program embeds ahead of the runner itself.
func CheckerPy() string { return checkerPy }

// Schema is the rules table schema this package decodes.
const Schema = 1

// Fixed rule ids that checkers report on their own (their messages and
// reasons still live in the table under "rules").
const (
	RuleParseError        = "parse-error"
	RuleCodeTooLarge      = "code-too-large"
	RuleNestingTooDeep    = "nesting-too-deep"
	RuleValidationTimeout = "validation-timeout"
	RuleDunderSubscript   = "dunder-subscript"
	RuleForbiddenString   = "forbidden-string"
	// RuleModuleAttribute is the forbidden_attributes rule of attribute
	// names that are modules (sys, os, codecs, ...): it applies to
	// attributes read of an imported module or a chain from one; the
	// module views stop the rest.
	RuleModuleAttribute = "module-attribute"
)

// ErrInvalidTable is wrapped by every error Decode returns.
var ErrInvalidTable = errors.New("invalid rules table")

// Text is what a rule tells the author of rejected code.
type Text struct {
	Message string `json:"message"`
	Why     string `json:"why"`
	// Fix says what to write instead; it ends every finding's message.
	Fix string `json:"fix"`
}

// Shapes a reflection builtin may be used in (Table.BuiltinShapes).
const (
	// ShapeOneArgOrClassCheck: a call with exactly one positional
	// argument (type(x), vars(self)), or the class argument of
	// isinstance/issubclass, or a name in an annotation.
	ShapeOneArgOrClassCheck = "one-argument-or-class-check"
	ShapeLiteralAttribute   = "literal-attribute"
	// ShapeGuardedCall: any plain call (the runner's guarded version
	// checks its arguments at run time); a bare reference is refused.
	ShapeGuardedCall = "guarded-call"
)

// Limits bound the checkers' own work.
type Limits struct {
	MaxCodeBytes int `json:"max_code_bytes"`
	MaxDepth     int `json:"max_depth"`
	TimeoutMS    int `json:"timeout_ms"`
}

// Table is the decoded rules table. Its fields mirror rules.json; see
// docs/validator.md for what each rule stops.
type Table struct {
	Schema         int               `json:"schema"`
	PythonVersion  string            `json:"python_version"`
	Limits         Limits            `json:"limits"`
	Rules          map[string]Text   `json:"rules"`
	ForbiddenNames map[string]string `json:"forbidden_names"`
	Dunder         struct {
		AttributeRule string   `json:"attribute_rule"`
		NameRule      string   `json:"name_rule"`
		Allow         []string `json:"allow"`
	} `json:"dunder"`
	Private struct {
		Rule  string   `json:"rule"`
		Allow []string `json:"allow"`
	} `json:"private"`
	ReservedPrefixes struct {
		Rule     string   `json:"rule"`
		Prefixes []string `json:"prefixes"`
	} `json:"reserved_prefixes"`
	ForbiddenAttributes map[string]string `json:"forbidden_attributes"`
	// AttributeNameCalls are the callees (a name, or the last part of a
	// dotted callee) whose string-literal arguments Python reads as
	// attribute names: each dotted part must pass the attribute rules.
	AttributeNameCalls []string `json:"attribute_name_calls"`
	// BuiltinShapes lets a reflection builtin through in one shape:
	// "one-argument-or-class-check" (type(x), vars(self); type as the
	// class argument of isinstance/issubclass) or "literal-attribute" (getattr(obj,
	// 'name'[, default]), hasattr(obj, 'name') with a plain literal name).
	BuiltinShapes map[string]string `json:"builtin_shapes"`
	// GuardedBuiltins are the builtins the runner hands out as guarded
	// versions that refuse attribute names the attribute rules forbid.
	GuardedBuiltins []string `json:"guarded_builtins"`
	FormatMethods   []string `json:"format_methods"`
	FormatRule      string   `json:"format_rule"`
	ImportRules     struct {
		NotAllowed string `json:"not_allowed"`
		Relative   string `json:"relative"`
		Star       string `json:"star"`
		// NotInSurface refuses m.name and from m import name where m is
		// an allowed module with a reviewed surface (ModuleSurfaces) that
		// does not hold name (io.open): the module view has no such name
		// at run time either.
		NotInSurface string `json:"not_in_surface"`
	} `json:"import_rules"`
	ClassRule string `json:"class_rule"`
	// ClassPatternRule refuses a class pattern with positional
	// sub-patterns (case C(a)) unless C is one of MatchSelfTypes, not
	// rebound in the body: positional patterns read the attributes named
	// by C.__match_args__.
	ClassPatternRule   string   `json:"class_pattern_rule"`
	MatchSelfTypes     []string `json:"match_self_types"`
	AttributeWriteRule string   `json:"attribute_write_rule"`
	// Classes is what a sandbox with classes on allows beyond the default
	// rules: class statements (without keywords: KeywordRule), the
	// Builtins classes need, and the ordinary dunder Methods a class body
	// may define and code may read as attributes (super().__init__).
	Classes struct {
		KeywordRule string   `json:"keyword_rule"`
		Builtins    []string `json:"builtins"`
		// Methods are dunder methods a class body may define, any code may
		// name, and code may read of any object (d.__getitem__: the
		// operator's method).
		Methods []string `json:"methods"`
		// OwnAttributeRules are forbidden_attributes rules whose names
		// (f_back, co_code, ...) the code may use as its own attribute
		// names: with classes on they pass statically on anything but an
		// imported module or a chain from one, and the runner lets a read
		// through only of a function or class the body defines or their
		// instances (the user's self.co_code, never a frame's f_back).
		OwnAttributeRules []string `json:"own_attribute_rules"`
		// HasattrDunders are dunder names (__dict__, __iter__, __len__)
		// hasattr may test by name on anything: it hands out a bool.
		// Reading them by name stays refused.
		HasattrDunders []string `json:"hasattr_dunders"`
		// OwnDunders are dunder attributes (__dict__, __annotations__)
		// that with classes on pass statically when read (never as an
		// assignment target) of anything but an imported module or a
		// chain from one: the runner routes every read through
		// _orq_odict, which hands out only an own object's: a snapshot of
		// an instance's or a function's __dict__ whose writes go through
		// to it but refuse the names setattr refuses (the real dict would
		// take dunder keys that copy and other stdlib code look up on the
		// instance), a copy of a class's or function's annotations.
		OwnDunders []string `json:"own_dunders"`
		// Hooks a class body may define too, but code may read only of
		// super(), a class it defines or a builtin type (a stdlib
		// __init__ or descriptor run on a foreign object writes or reads
		// what it likes).
		Hooks []string `json:"hooks"`
	} `json:"classes"`
	// Runtime lists what the runner's audit hook refuses.
	Runtime struct {
		AuditBlock   []string `json:"audit_block"`
		AuditBlockOS []string `json:"audit_block_os"`
		OSModules    []string `json:"os_modules"`
		// WorkspaceEvents are the audit events (open, os.listdir,
		// os.scandir, os.mkdir, os.rmdir, os.remove, os.rename: both
		// paths) the hook lets through when the path they name is
		// below the execution's workspace (runner.Request.Workspace),
		// reading and writing: the one place user code may write. Landlock
		// grants the same directory (runner.Seal.WritePaths) and nothing
		// more, so the kernel holds the line if the hook is bypassed.
		WorkspaceEvents []string `json:"workspace_events"`
	} `json:"runtime"`
	// DangerousImports maps each module that hands user code OS, process,
	// file, network, introspection or code-loading power to why. A name
	// covers the module and its submodules ("os" covers "os.path").
	DangerousImports map[string]string `json:"dangerous_imports"`
	SafeBuiltins     []string          `json:"safe_builtins"`
	// ModuleSurfaces maps each reviewed module ("collections.abc" is its own
	// entry) to the names `import m` hands user code: functions, classes and
	// constants, never the interpreter's module-level mutable state, never
	// another module unless it is a reviewed submodule. An allowed module
	// without an entry gets every public name (the policy must allow it
	// deliberately: allow_unreviewed_imports).
	ModuleSurfaces map[string][]string `json:"module_surfaces"`
	// PackageSubmodules maps a package to its reviewed submodules: those
	// listing the package in allowed_imports allows too ("matplotlib" ->
	// "matplotlib.pyplot"). The runner imports them with the package,
	// before the code runs (a submodule's first import under the audit
	// hook may do what the hook refuses). Any other submodule that its
	// package did not import itself must be listed on its own.
	PackageSubmodules map[string][]string `json:"package_submodules"`
	// EgressModules are the dangerous modules the runner serves with views
	// of its own in a sandbox with a network {} block (urllib.request:
	// urlopen through the session's egress proxy; urllib.error): that
	// block acknowledges them, and they are not OS modules to the audit
	// hook there. Everywhere else they stay dangerous.
	EgressModules []string `json:"egress_modules"`
}

// Reviewed reports whether module (dotted, as imported) has a reviewed
// surface.
func (t *Table) Reviewed(module string) bool {
	_, ok := t.ModuleSurfaces[module]
	return ok
}

// Decode parses and checks a rules table: the schema must be Schema and
// every rule id the table refers to must be described under "rules".
func Decode(b []byte) (*Table, error) {
	t := &Table{}
	if err := json.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("rules.json: %v: %w", err, ErrInvalidTable)
	}
	if t.Schema != Schema {
		return nil, fmt.Errorf("rules.json: unsupported schema %d (want %d): %w", t.Schema, Schema, ErrInvalidTable)
	}
	if t.Limits.MaxCodeBytes <= 0 || t.Limits.MaxDepth <= 0 || t.Limits.TimeoutMS <= 0 {
		return nil, fmt.Errorf("rules.json: limits must be positive: %w", ErrInvalidTable)
	}
	if len(t.DangerousImports) == 0 {
		return nil, fmt.Errorf("rules.json: no dangerous_imports list: %w", ErrInvalidTable)
	}
	for pkg, subs := range t.PackageSubmodules {
		for _, s := range subs {
			if !strings.HasPrefix(s, pkg+".") {
				return nil, fmt.Errorf("rules.json: package_submodules: %q is not a submodule of %q: %w", s, pkg, ErrInvalidTable)
			}
		}
		if _, bad := t.DangerousImports[pkg]; bad {
			return nil, fmt.Errorf("rules.json: package_submodules: %q is on the dangerous list: %w", pkg, ErrInvalidTable)
		}
	}
	for _, m := range t.EgressModules {
		if _, ok := t.DangerousImports[m]; !ok {
			return nil, fmt.Errorf("rules.json: egress_modules: %q is not on the dangerous list: %w", m, ErrInvalidTable)
		}
	}
	for m := range t.ModuleSurfaces {
		if _, bad := t.DangerousImports[m]; bad {
			return nil, fmt.Errorf("rules.json: module %q has a reviewed surface but is on the dangerous list: %w", m, ErrInvalidTable)
		}
	}
	refs := []string{RuleParseError, RuleCodeTooLarge, RuleNestingTooDeep, RuleValidationTimeout,
		t.Dunder.AttributeRule, t.Dunder.NameRule, t.Private.Rule, t.ReservedPrefixes.Rule,
		t.FormatRule, t.ImportRules.NotAllowed, t.ImportRules.Relative, t.ImportRules.Star,
		t.ClassRule, t.ClassPatternRule, t.AttributeWriteRule, t.Classes.KeywordRule, RuleDunderSubscript, RuleForbiddenString}
	for _, r := range t.ForbiddenNames {
		refs = append(refs, r)
	}
	for name, shape := range t.BuiltinShapes {
		if shape != ShapeOneArgOrClassCheck && shape != ShapeLiteralAttribute && shape != ShapeGuardedCall {
			return nil, fmt.Errorf("rules.json: builtin_shapes: unknown shape %q for %q: %w", shape, name, ErrInvalidTable)
		}
	}
	for _, r := range t.ForbiddenAttributes {
		refs = append(refs, r)
	}
	for _, r := range refs {
		if _, ok := t.Rules[r]; !ok || r == "" {
			return nil, fmt.Errorf("rules.json: rule %q is referenced but not described: %w", r, ErrInvalidTable)
		}
	}
	return t, nil
}

// Default returns the embedded table, decoded once. The caller must not
// modify it.
func Default() *Table { return defaultTable() }

var defaultTable = sync.OnceValue(func() *Table {
	t, err := Decode(tableJSON)
	if err != nil {
		panic("rules: the embedded table is broken: " + err.Error())
	}
	return t
})

// Version identifies the embedded rules table: the hex SHA-256 of
// rules.json as embedded. Two programs report the same Version exactly when
// they judge code by the same table, so a verdict that names it
// (shared.Verdict.Rules) is only trusted by a reader of that table.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	sum := sha256.Sum256(tableJSON)
	return hex.EncodeToString(sum[:])
})

// IDs returns every rule id the table describes, sorted.
func (t *Table) IDs() []string {
	ids := make([]string, 0, len(t.Rules))
	for id := range t.Rules {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Dangerous returns a copy of DangerousImports.
func (t *Table) Dangerous() map[string]string {
	out := make(map[string]string, len(t.DangerousImports))
	for k, v := range t.DangerousImports {
		out[k] = v
	}
	return out
}

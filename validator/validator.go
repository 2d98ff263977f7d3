// Package validator holds the static checks every tier runs before code is
// executed, in Go, over the rules table of package rules that the in-child
// CPython checker (rules/checker.py) reads too.
//
// The Go checker parses the code with tree-sitter's Python grammar and walks
// the syntax tree once, by node kind ids, reporting every finding (not just
// the first). It bounds its own work: a size limit, a nesting-depth limit and
// a time limit (the smaller of the rules table's timeout and the context's
// deadline), each reported as a finding rather than a crash or a hang.
//
// See docs/validator.md for every rule, why it exists and its known limits.
package validator

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	ts "github.com/tree-sitter/go-tree-sitter"
	tspython "github.com/tree-sitter/tree-sitter-python/bindings/go"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
)

// RulesJSON returns the rules table (package rules), the single source of
// truth shared with the Python runner's in-child checker. The caller must not
// modify it.
func RulesJSON() []byte { return rules.JSON() }

// Fixed rule ids that the walker reports on its own (their messages and
// reasons still live in the rules table under "rules").
const (
	RuleParseError        = rules.RuleParseError
	RuleCodeTooLarge      = rules.RuleCodeTooLarge
	RuleNestingTooDeep    = rules.RuleNestingTooDeep
	RuleValidationTimeout = rules.RuleValidationTimeout
)

// table is the decoded rules table with the sets the walker looks names up in.
type table struct {
	*rules.Table

	dunderAllow   map[string]bool
	privateAllow  map[string]bool
	attrNameCalls map[string]bool
	formatMethods map[string]bool
	classMethods  map[string]bool // definable in a class body: methods and hooks
	classHooks    map[string]bool // readable only of methodReceiver objects
	classBuiltins map[string]bool
	ownRules      map[string]bool // forbidden_attributes rules a body's own objects may use
	hasattrDunder map[string]bool // dunders hasattr may test by name
	ownDunders    map[string]bool // dunders read of a body's own objects (self.__dict__)
	safeBuiltins  map[string]bool
}

func loadTable(b []byte) (*table, error) {
	rt, err := rules.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("validator: %w", err)
	}
	return newTable(rt), nil
}

func newTable(rt *rules.Table) *table {
	set := func(xs []string) map[string]bool {
		m := make(map[string]bool, len(xs))
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	return &table{
		Table:         rt,
		dunderAllow:   set(rt.Dunder.Allow),
		privateAllow:  set(rt.Private.Allow),
		attrNameCalls: set(rt.AttributeNameCalls),
		formatMethods: set(rt.FormatMethods),
		classMethods:  set(append(slices.Clone(rt.Classes.Methods), rt.Classes.Hooks...)),
		classHooks:    set(rt.Classes.Hooks),
		classBuiltins: set(rt.Classes.Builtins),
		ownRules:      set(rt.Classes.OwnAttributeRules),
		hasattrDunder: set(rt.Classes.HasattrDunders),
		ownDunders:    set(rt.Classes.OwnDunders),
		safeBuiltins:  set(rt.SafeBuiltins),
	}
}

var defaultTable = newTable(rules.Default())

// RuleIDs returns every rule id the rules table describes, sorted.
func RuleIDs() []string {
	return defaultTable.IDs()
}

// RuleDescription returns the message and the reason of a rule id.
func RuleDescription(id string) (message, why string, ok bool) {
	r, ok := defaultTable.Rules[id]
	return r.Message, r.Why, ok
}

// MaxCodeBytes is the rules table's size limit for one body; backends refuse
// larger code before anything else looks at it.
func MaxCodeBytes() int { return defaultTable.Limits.MaxCodeBytes }

// Option configures a Validator.
type Option func(*Validator)

// WithMaxCodeBytes overrides the size limit (bytes of UTF-8 source).
func WithMaxCodeBytes(n int) Option { return func(v *Validator) { v.maxBytes = n } }

// WithTimeout overrides the validator's own time limit (a context deadline
// that is sooner still wins).
func WithTimeout(d time.Duration) Option { return func(v *Validator) { v.timeout = d } }

// Features widens what a body may use beyond the default rules. The zero
// value is the strictest language.
type Features struct {
	// Classes allows class statements (with bases, without keywords), the
	// ordinary dunder methods of the rules table's classes.methods in a
	// class body and as attributes (super().__init__(msg)), and so
	// dataclasses and user exception classes. A backend turns it on where
	// its kernel layers are the wall and declares shared.CapClasses.
	Classes bool
}

// Validator checks Python function bodies. It is safe for concurrent use:
// tree-sitter parsers are not, so each Check borrows one from a small pool.
type Validator struct {
	t        *table
	maxBytes int
	maxDepth int
	timeout  time.Duration
	parsers  chan *parser
	cache    *verdictCache // nil: no cache (see WithCache)
	stats    counters
}

var (
	language = ts.NewLanguage(tspython.Language())
	kinds    = buildKinds(language)
)

// New returns a Validator using the embedded rules table.
func New(opts ...Option) *Validator {
	t := defaultTable
	v := &Validator{
		t:        t,
		maxBytes: t.Limits.MaxCodeBytes,
		maxDepth: t.Limits.MaxDepth,
		timeout:  time.Duration(t.Limits.TimeoutMS) * time.Millisecond,
		parsers:  make(chan *parser, 2*runtime.GOMAXPROCS(0)),
	}
	for _, o := range opts {
		o(v)
	}
	return v
}

func (v *Validator) getParser() *parser {
	select {
	case p := <-v.parsers:
		return p
	default:
		return newParser()
	}
}

func (v *Validator) putParser(p *parser) {
	p.reset()
	select {
	case v.parsers <- p:
	default:
		p.close()
	}
}

// Check returns every finding for code under the given import allowlist,
// with the default Features. An empty result means the code is accepted.
// Findings are ordered by position.
func (v *Validator) Check(ctx context.Context, code string, allowedImports []string) []shared.Finding {
	return v.CheckWith(ctx, code, allowedImports, Features{})
}

// CheckWith is Check with the language widened by f.
func (v *Validator) CheckWith(ctx context.Context, code string, allowedImports []string, f Features) []shared.Finding {
	if ctx == nil {
		ctx = context.Background()
	}
	v.stats.checked.Add(1)
	if v.cache == nil {
		return v.check(ctx, code, allowedImports, f)
	}
	k := cacheKey(code, allowedImports, f)
	if found, ok := v.cache.get(k); ok {
		return found
	}
	found := v.check(ctx, code, allowedImports, f)
	if ctx.Err() == nil && cacheable(found) {
		v.cache.put(k, found)
	}
	return found
}

func (v *Validator) check(ctx context.Context, code string, allowedImports []string, features Features) []shared.Finding {
	if v.maxBytes > 0 && len(code) > v.maxBytes {
		return []shared.Finding{{Rule: RuleCodeTooLarge, Line: 1, Column: 1,
			Message: fmt.Sprintf("%s: %d bytes, the limit is %d", v.t.Rules[RuleCodeTooLarge].Message, len(code), v.maxBytes)}}
	}
	if i := strings.IndexByte(code, 0); i >= 0 {
		w := &walker{src: []byte(code)}
		line, col := w.position(i)
		return []shared.Finding{{Rule: RuleParseError, Line: line, Column: col,
			Message: v.t.Rules[RuleParseError].Message + ": source code cannot contain null bytes"}}
	}
	if !utf8.ValidString(code) {
		return []shared.Finding{{Rule: RuleParseError, Line: 1, Column: 1,
			Message: v.t.Rules[RuleParseError].Message + ": source is not valid UTF-8"}}
	}
	// CPython reads "\r\n" and a bare "\r" as line ends; tree-sitter's grammar
	// does not treat a bare "\r" as one. Normalise so both see the same lines.
	src := normalizeNewlines(code)

	deadline := time.Time{}
	if v.timeout > 0 {
		deadline = time.Now().Add(v.timeout)
	}
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
		deadline = d
	}

	allowed := make(map[string]bool, len(allowedImports))
	for _, m := range allowedImports {
		allowed[m] = true
	}
	w := &walker{
		v:        v,
		t:        v.t,
		src:      src,
		allowed:  allowed,
		ctx:      ctx,
		deadline: deadline,
		maxDepth: v.maxDepth,
		classes:  features.Classes,
	}

	p := v.getParser()
	defer v.putParser(p)
	// The parse is one C call; its progress callback (in C) stops it at the
	// deadline or when ctx is cancelled.
	var ctl *parseCtl
	limited := !deadline.IsZero() || ctx.Done() != nil
	var timeout time.Duration
	if limited {
		ctl = &parseCtl{}
		if !deadline.IsZero() {
			if timeout = time.Until(deadline); timeout <= 0 {
				timeout = 1
			}
		}
		if ctx.Done() != nil {
			if ctx.Err() != nil {
				ctl.cancel()
			} else {
				stop := context.AfterFunc(ctx, ctl.cancel)
				defer stop()
			}
		}
	}
	tree, ok := p.parse(src, limited, timeout, ctl)
	if !ok {
		return []shared.Finding{w.timeoutFinding()}
	}
	defer tree.close()
	w.tree = tree
	w.nodes = p.flatten(tree)
	w.run()
	sort.SliceStable(w.findings, func(i, j int) bool {
		a, b := w.findings[i], w.findings[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return w.findings
}

func normalizeNewlines(code string) []byte {
	if strings.IndexByte(code, '\r') < 0 {
		return []byte(code)
	}
	b := make([]byte, 0, len(code))
	for i := 0; i < len(code); i++ {
		c := code[i]
		if c == '\r' {
			b = append(b, '\n')
			if i+1 < len(code) && code[i+1] == '\n' {
				i++
			}
			continue
		}
		b = append(b, c)
	}
	return b
}

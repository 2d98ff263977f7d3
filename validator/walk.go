package validator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
)

// ctxKind is what the parent says about an identifier or dotted name below it.
type ctxKind uint8

const (
	ctxNone         ctxKind = iota // an expression: identifiers are names
	ctxTarget                      // an assignment / del / for target
	ctxImportPath                  // import a.b.c
	ctxFromModule                  // from a.b import ...
	ctxImportedName                // from m import NAME
	ctxAttrName                    // obj.NAME, case C(NAME=...)
	ctxKwName                      // f(NAME=...)
)

type walker struct {
	v        *Validator
	t        *table
	src      []byte
	allowed  map[string]bool
	ctx      context.Context
	deadline time.Time
	maxDepth int
	classes  bool // Features.Classes

	tree   cTree      // the parsed tree (ancestorKinds looks offsets up in it)
	nodes  []flatNode // the same tree, flattened: what the walk reads
	ancBuf [200]uint16

	hasError  bool
	stop      bool
	deepSeen  bool
	count     int
	lineStart []int
	findings  []shared.Finding

	// shaped holds identifier nodes of reflection builtins used in a shape
	// the rules table allows (builtin_shapes), marked by their call.
	shaped map[node]bool
	// bound caches binds(name); importBound and classBound cache
	// bindsImport and boundOnlyByClass (each scans the whole tree).
	bound       map[string]bool
	importBound map[string]bool
	// modules caches importedModule, attrModules moduleOf of attributes.
	modules     map[string]string
	attrModules map[node]string
	classBound  map[string]bool
}

func (w *walker) timeoutFinding() shared.Finding {
	return shared.Finding{Rule: RuleValidationTimeout, Line: 1, Column: 1,
		Message: w.t.Rules[RuleValidationTimeout].Message}
}

func (w *walker) run() {
	w.hasError = w.nodes[0].flags&flagHasError != 0
	w.checkIndentation()
	w.checkPrintable()
	w.visit(0, 0, ctxNone, catOther)
	if w.stop && w.ctxDone() {
		w.findings = append(w.findings, w.timeoutFinding())
	}
}

func (w *walker) ctxDone() bool {
	return w.ctx.Err() != nil || (!w.deadline.IsZero() && time.Now().After(w.deadline))
}

// position converts a byte offset into a 1-based line and a 1-based column
// counted in characters (as shared.Finding documents).
func (w *walker) position(off int) (int, int) {
	if w.lineStart == nil {
		w.lineStart = append(w.lineStart, 0)
		for i, b := range w.src {
			if b == '\n' {
				w.lineStart = append(w.lineStart, i+1)
			}
		}
	}
	lo, hi := 0, len(w.lineStart)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if w.lineStart[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if off > len(w.src) {
		off = len(w.src)
	}
	return lo + 1, utf8.RuneCount(w.src[w.lineStart[lo]:off]) + 1
}

func (w *walker) snippet(start, end uint) string {
	if end > uint(len(w.src)) {
		end = uint(len(w.src))
	}
	if start > end {
		start = end
	}
	s := string(w.src[start:end])
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if utf8.RuneCountInString(s) > 80 {
		r := []rune(s)
		s = string(r[:80]) + "…"
	}
	return s
}

func (w *walker) add(rule string, n node, detail string) {
	w.addAt(rule, w.start(n), w.end(n), detail)
}

func (w *walker) addAt(rule string, start, end uint, detail string) {
	line, col := w.position(int(start))
	msg := w.t.Rules[rule].Message
	if detail != "" {
		msg += ": " + detail
	}
	if fix := w.t.Rules[rule].Fix; fix != "" {
		msg += "; instead: " + fix
	}
	w.findings = append(w.findings, shared.Finding{Rule: rule, Message: msg,
		Line: line, Column: col, Snippet: w.snippet(start, end)})
}

func (w *walker) text(n node) string {
	return string(w.src[w.start(n):w.end(n)])
}

// visit walks the node n and its subtree.
func (w *walker) visit(n node, depth int, cx ctxKind, parent category) {
	if w.stop {
		return
	}
	w.count++
	if w.count&511 == 0 && w.ctxDone() {
		w.stop = true
		return
	}
	cat := w.cat(n)
	if depth > w.maxDepth {
		if !w.deepSeen {
			w.deepSeen = true
			w.add(RuleNestingTooDeep, n, fmt.Sprintf("deeper than %d levels", w.maxDepth))
		}
		return
	}
	if w.hasError && w.missing(n) {
		w.add(RuleParseError, n, fmt.Sprintf("missing %q", w.kindName(n)))
		return
	}

	switch cat {
	case catIdentifier:
		w.checkIdent(n, cx)
		return
	case catError:
		w.add(RuleParseError, n, "invalid syntax")
	case catComment, catLineContinuation:
		return
	case catDottedName:
		w.visitDotted(n, cx)
		return
	case catAttribute:
		w.visitAttribute(n, depth, cx)
		return
	case catSubscript:
		w.visitSubscript(n, depth)
		return
	case catString, catConcatString:
		w.visitString(n, depth, cat)
		return
	case catCall:
		w.checkCall(n)
		cx = ctxNone
	case catKeywordArgument:
		w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
			if fid == kinds.fieldName && ccat == catIdentifier {
				w.checkIdent(ch, ctxKwName)
			} else {
				w.visit(ch, depth+1, ctxNone, cat)
			}
			return true
		})
		return
	case catKeywordPattern:
		first := true
		w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
			if first && ccat == catIdentifier {
				w.checkIdent(ch, ctxAttrName)
			} else {
				w.visit(ch, depth+1, ctxNone, cat)
			}
			first = false
			return true
		})
		return
	case catClassDef:
		if !w.classes {
			w.add(w.t.ClassRule, n, "")
		} else if sc := w.childByField(n, kinds.fieldSuperclasses); sc != noNode {
			for a := range w.namedChildren(sc) {
				switch w.cat(a) {
				case catDictionarySplat:
					w.add(w.t.Classes.KeywordRule, a, "")
				case catKeywordArgument:
					// metaclass=..., or a private keyword (_root=True:
					// how typing's internals let themselves be subclassed)
					if k := w.childByField(a, kinds.fieldName); k == noNode || w.text(k) == "metaclass" || strings.HasPrefix(w.text(k), "_") {
						w.add(w.t.Classes.KeywordRule, a, "")
					}
				}
			}
		}
	case catClassPattern:
		w.checkClassPattern(n)
	case catImport:
		w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
			w.visit(ch, depth+1, ctxImportPath, cat)
			return true
		})
		return
	case catImportFrom, catFutureImport:
		if cat == catFutureImport && !w.allowed["__future__"] {
			w.add(w.t.ImportRules.NotAllowed, n, "module \"__future__\"")
		}
		w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
			switch {
			case ccat == catRelativeImport:
				w.add(w.t.ImportRules.Relative, ch, "")
			case ccat == catWildcardImport:
				w.add(w.t.ImportRules.Star, ch, "")
			case fid == kinds.fieldModule:
				w.visit(ch, depth+1, ctxFromModule, cat)
			case fid == kinds.fieldName:
				w.visit(ch, depth+1, ctxImportedName, cat)
			default:
				w.visit(ch, depth+1, ctxNone, cat)
			}
			return true
		})
		return
	case catAliasedImport:
		w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
			if fid == kinds.fieldAlias {
				w.visit(ch, depth+1, ctxNone, cat)
			} else {
				w.visit(ch, depth+1, cx, cat)
			}
			return true
		})
		return
	case catPrintStatement:
		w.add(RuleParseError, n, "Python 2 print statement")
	case catExecStatement:
		w.add(w.ruleForName("exec"), n, "\"exec\" (Python 2 exec statement)")
	case catTooNew:
		w.add(RuleParseError, n, "syntax newer than Python "+w.pyVersion())
	case catTypeParameter:
		if parent == catFunctionDef || parent == catClassDef {
			w.add(RuleParseError, n, "type parameter lists need Python 3.12")
		}
	case catInteger:
		if badInteger(w.text(n)) {
			w.add(RuleParseError, n, "leading zeros in decimal integer literals are not permitted")
		}
		return
	case catParameters:
		w.checkParameters(n)
	case catArgumentList:
		w.checkArguments(n)
	case catDictionarySplat:
		if parent != catArgumentList && parent != catDictionary {
			w.add(RuleParseError, n, "'**' unpacking is only allowed in calls and dict displays")
		}
	case catAugAssignment:
		if l := w.childByField(n, kinds.fieldLeft); l != noNode {
			switch w.cat(l) {
			case catIdentifier, catAttribute, catSubscript:
			default:
				w.add(RuleParseError, l, "illegal target for augmented assignment")
			}
		}
		w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
			if fid == kinds.fieldLeft {
				w.visit(ch, depth+1, ctxTarget, cat)
			} else {
				w.visit(ch, depth+1, ctxNone, cat)
			}
			return true
		})
		return
	case catBlock:
		body := false
		w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
			if ccat != catComment {
				body = true
			}
			w.visit(ch, depth+1, ctxNone, cat)
			return true
		})
		if !body {
			w.add(RuleParseError, n, "expected an indented block")
		}
		return
	case catNamedExpression:
		if parent == catExpressionStatement {
			w.add(RuleParseError, n, "unparenthesized assignment expression at statement level")
		}
	case catAssignment, catFor, catForIn:
		w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
			if fid == kinds.fieldLeft {
				w.visit(ch, depth+1, ctxTarget, cat)
			} else {
				w.visit(ch, depth+1, ctxNone, cat)
			}
			return true
		})
		return
	case catDelete:
		for ch := range w.namedChildren(n) {
			if !w.validDelTarget(ch, 0) {
				w.add(RuleParseError, ch, "cannot delete this expression")
			}
		}
		cx = ctxTarget
	case catAsPatternTarget:
		cx = ctxTarget
	case catListSplat, catListSplatPattern:
		if cat == catListSplat && parent == catListSplat {
			w.add(RuleParseError, n, "invalid syntax ('**' is not allowed here)")
		}
		if cx != ctxTarget {
			cx = ctxNone
		}
	case catTargetContainer, catParenthesized:
		if cx != ctxTarget {
			cx = ctxNone
		}
	default:
		cx = ctxNone
	}
	for ch, end := n+1, node(w.nodes[n].next); ch < end; ch = node(w.nodes[ch].next) {
		w.visit(ch, depth+1, cx, cat)
	}
}

// eachChild calls f with each child of n in turn, its field id and its
// category, until f returns false.
func (w *walker) eachChild(n node, f func(ch node, fid uint16, cat category) bool) {
	for ch, end := n+1, node(w.nodes[n].next); ch < end; ch = node(w.nodes[ch].next) {
		if !f(ch, w.nodes[ch].field, kinds.cat[w.nodes[ch].kind]) {
			break
		}
	}
}

func (w *walker) pyVersion() string { return "3.11" }

func (w *walker) ruleForName(name string) string {
	if r, ok := w.t.ForbiddenNames[name]; ok {
		return r
	}
	return RuleParseError
}

// identText returns the identifier as CPython sees it: NFKC-normalised when
// it is not plain ASCII.
func identText(b []byte) string {
	for _, x := range b {
		if x >= 0x80 {
			return norm.NFKC.String(string(b))
		}
	}
	return string(b)
}

func isDunder(s string) bool {
	return len(s) >= 5 && strings.HasPrefix(s, "__") && strings.HasSuffix(s, "__")
}

func (w *walker) reserved(s string) bool {
	for _, p := range w.t.ReservedPrefixes.Prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func (w *walker) checkIdent(n node, cx ctxKind) {
	name := identText(w.src[w.start(n):w.end(n)])
	switch cx {
	case ctxAttrName:
		w.checkAttrName(n, name)
	case ctxKwName:
		w.checkNameShape(n, name)
	case ctxImportedName:
		// from m import NAME reads m.NAME: a forbidden builtin name is
		// refused here even though the import binds it, unless m's
		// reviewed surface hands out a function of that name (re.compile).
		if !w.checkAttrName(n, name) {
			if r, ok := w.t.ForbiddenNames[name]; ok && !w.surfaceHas(n, name) {
				w.add(r, n, fmt.Sprintf("%q", name))
			} else {
				w.checkName(n, name)
			}
		}
	case ctxImportPath, ctxFromModule:
		w.checkImportTop(n, name)
	default:
		w.checkName(n, name)
	}
}

// inAnnotation reports whether n is inside an annotation (a parameter's,
// a return type, an annotated assignment's): there `type` names the class
// (dict[str, type]), as in isinstance(x, type).
func (w *walker) inAnnotation(n node) bool {
	for p := w.parent(n); p != noNode; p = w.parent(p) {
		switch w.kindName(p) {
		case "type":
			return true
		case "block", "module", "lambda", "call":
			return false
		}
	}
	return false
}

// checkName applies the rules for a name (a reference or a binding).
func (w *walker) checkName(n node, name string) bool {
	if r, ok := w.t.ForbiddenNames[name]; ok && !w.shaped[n] && !(w.classes && w.t.classBuiltins[name]) && !w.bindsCached(name) &&
		!(w.t.BuiltinShapes[name] == rules.ShapeOneArgOrClassCheck && w.inAnnotation(n)) {
		w.add(r, n, fmt.Sprintf("%q", name))
		return true
	}
	if name == "async" || name == "await" {
		w.add(RuleParseError, n, fmt.Sprintf("%q is a keyword", name))
		return true
	}
	return w.checkNameShape(n, name)
}

// checkNameShape applies the dunder and reserved-prefix rules to a name.
func (w *walker) checkNameShape(n node, name string) bool {
	if isDunder(name) && !w.t.dunderAllow[name] && !(w.classes && w.t.classMethods[name]) {
		w.add(w.t.Dunder.NameRule, n, fmt.Sprintf("%q", name))
		return true
	}
	if w.reserved(name) {
		w.add(w.t.ReservedPrefixes.Rule, n, fmt.Sprintf("%q", name))
		return true
	}
	return false
}

// attrRule returns the rule an attribute name breaks, or "".
func (t *table) attrRule(name string) string {
	if isDunder(name) {
		if t.dunderAllow[name] {
			return ""
		}
		return t.Dunder.AttributeRule
	}
	if r, ok := t.ForbiddenAttributes[name]; ok {
		return r
	}
	if strings.HasPrefix(name, "_") && !t.privateAllow[name] {
		return t.Private.Rule
	}
	return ""
}

func (w *walker) checkAttrName(n node, name string) bool {
	if r := w.t.attrRule(name); r != "" {
		w.add(r, n, fmt.Sprintf("%q", name))
		return true
	}
	return false
}

// surfaceHas reports whether the module of the from-import that imports
// identifier n has a reviewed surface listing name.
func (w *walker) surfaceHas(n node, name string) bool {
	stmt := w.parent(n)
	for stmt != noNode && w.cat(stmt) != catImportFrom {
		stmt = w.parent(stmt)
	}
	if stmt == noNode {
		return false
	}
	mod := w.childByField(stmt, kinds.fieldModule)
	if mod == noNode || w.cat(mod) != catDottedName {
		return false
	}
	return slices.Contains(w.t.ModuleSurfaces[identText(w.src[w.start(mod):w.end(mod)])], name)
}

// checkFromSurface applies checkSurface to from m import NAME, n being
// NAME's identifier.
func (w *walker) checkFromSurface(n node) {
	stmt := w.parent(n)
	for stmt != noNode && w.cat(stmt) != catImportFrom {
		stmt = w.parent(stmt)
	}
	if stmt == noNode {
		return
	}
	if mod := w.childByField(stmt, kinds.fieldModule); mod != noNode && w.cat(mod) == catDottedName {
		w.checkSurface(n, w.text(mod), w.text(n))
	}
}

func (w *walker) checkImportTop(n node, name string) {
	if !w.allowed[name] {
		w.add(w.t.ImportRules.NotAllowed, n, fmt.Sprintf("module %q", name))
	}
}

// checkSubmodule refuses the import of a submodule (urllib.request) of a
// package with a reviewed surface (urllib) that is not itself reviewed:
// the runner hands out only the reviewed parts of such a package. A
// submodule allowed_imports lists by name is the runner's to serve (its
// view of urllib.request through a session's egress proxy) or refuse.
func (w *walker) checkSubmodule(n node, path string) {
	top, _, _ := strings.Cut(path, ".")
	if _, ok := w.t.ModuleSurfaces[top]; !ok || !w.allowed[top] || w.allowed[path] {
		return
	}
	if _, ok := w.t.ModuleSurfaces[path]; !ok {
		w.add(w.t.ImportRules.NotAllowed, n, fmt.Sprintf("module %q: only the reviewed parts of %q are (import %s and use what it offers)", path, top, top))
	}
}

// visitDotted handles a dotted_name: an import path, or a name followed by
// attributes (in patterns).
func (w *walker) visitDotted(n node, cx ctxKind) {
	i := 0
	path := ""
	w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
		if ccat != catIdentifier {
			return true
		}
		n := ch
		switch {
		case cx == ctxImportPath || cx == ctxFromModule:
			if i == 0 {
				path = w.text(n)
				w.checkIdent(n, cx)
			} else {
				path += "." + w.text(n)
				w.checkIdent(n, ctxAttrName)
				w.checkSubmodule(n, path)
			}
		case cx == ctxImportedName:
			w.checkIdent(n, ctxImportedName)
			if i == 0 {
				w.checkFromSurface(n)
			}
		case i == 0:
			w.checkIdent(n, ctxNone)
		default:
			w.checkIdent(n, ctxAttrName)
		}
		i++
		return true
	})
}

func (w *walker) visitAttribute(n node, depth int, cx ctxKind) {
	object := noNode
	w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
		switch {
		case fid == kinds.fieldObject:
			object = ch
			w.visit(ch, depth+1, ctxNone, catAttribute)
		case fid == kinds.fieldAttribute && ccat == catIdentifier:
			an := ch
			name := identText(w.src[w.start(an):w.end(an)])
			if !w.attrAllowed(n, object, name, cx) {
				w.checkAttrName(an, name)
			}
			if m := w.moduleOf(object); m != "" {
				w.checkSurface(an, m, name)
			}
			if w.t.formatMethods[name] {
				w.checkFormatCall(n, object, name)
			}
		default:
			w.visit(ch, depth+1, ctxNone, catAttribute)
		}
		return true
	})
	// A write to an attribute of an imported module is refused here; any
	// other write is checked at run time (the runner allows functions and
	// classes the body defines and their instances).
	if cx != ctxTarget || object == noNode {
		return
	}
	// tree-sitter reads *m.x as (*m).x: the object is the splat's operand.
	for c := w.cat(object); c == catListSplat || c == catListSplatPattern || c == catParenthesized; c = w.cat(object) {
		inner := noNode
		for ch := range w.namedChildren(object) {
			inner = ch
			break
		}
		if inner == noNode {
			return
		}
		object = inner
	}
	if w.cat(object) == catIdentifier && w.bindsImport(identText(w.src[w.start(object):w.end(object)])) {
		w.add(w.t.AttributeWriteRule, n, "")
	}
}

// attrAllowed reports whether the attribute read n (object.name) passes
// although the attribute rules name it:
//   - with classes, an ordinary dunder method of anything (d.__getitem__),
//     a hook (__init__) of a methodReceiver, and a private name (self._x)
//     of anything but an imported module or a chain from one:
//     the runner checks at run time that a private name is read of an
//     object the body made (_orq_own); likewise a name of a
//     classes.own_attribute_rules rule (self.co_code, self.f_back);
//   - x.__class__.__name__ (and __qualname__): type(x).__name__;
//   - with classes, a classes.own_dunders name (self.__dict__,
//     cls.__annotations__) read, not assigned, of anything but an imported
//     module or a chain from one: the runner hands out only an own
//     object's (_orq_odict);
//   - a module-attribute name (.os, .warnings, .types) of anything but an
//     imported module or a chain from one: module views hold no module the
//     policy does not allow, and a record's field may be called os; and of
//     anything when the policy allows that module (socket.socket with
//     socket allowed).
func (w *walker) attrAllowed(n, object node, name string, cx ctxKind) bool {
	if w.classes {
		if w.t.ownDunders[name] && cx != ctxTarget && !w.importRooted(object) {
			return true
		}
		if w.t.classMethods[name] && (!w.t.classHooks[name] || w.methodReceiver(object)) {
			return true
		}
		if !isDunder(name) && strings.HasPrefix(name, "_") && !w.reserved(name) && !w.importRooted(object) {
			return true
		}
		if w.t.ownRules[w.t.ForbiddenAttributes[name]] && !w.importRooted(object) {
			return true
		}
	}
	if name == "__class__" {
		if p := w.parent(n); p != noNode && w.cat(p) == catAttribute && w.childByField(p, kinds.fieldObject) == n {
			if a := w.childByField(p, kinds.fieldAttribute); a != noNode {
				if an := w.text(a); an == "__name__" || an == "__qualname__" {
					return true
				}
			}
		}
	}
	if w.t.ForbiddenAttributes[name] == rules.RuleModuleAttribute && (!w.importRooted(object) || w.allowed[name]) {
		return true
	}
	return false
}

// importRooted reports whether n is a name an import binds, or an
// attribute chain starting at one (json.codecs, re.enum).
func (w *walker) importRooted(n node) bool {
	for n != noNode {
		switch w.cat(n) {
		case catIdentifier:
			return w.bindsImport(w.text(n))
		case catAttribute:
			n = w.childByField(n, kinds.fieldObject)
		case catParenthesized:
			inner := noNode
			for ch := range w.namedChildren(n) {
				inner = ch
				break
			}
			n = inner
		default:
			return false
		}
	}
	return false
}

// methodReceiver reports whether code may read an ordinary dunder method
// (__init__) of the expression n: super() without arguments, a class the body defines (a name
// bound only by class statements) or a builtin type the body does not
// rebind. Of any other object such a read would hand out a stdlib
// __init__ that sets attributes on whatever it is given.
func (w *walker) methodReceiver(n node) bool {
	if n == noNode {
		return false
	}
	switch w.cat(n) {
	case catCall:
		// zero-argument super() only: super(T, obj) binds T's parent's
		// methods to any obj
		f := w.childByField(n, kinds.fieldFunction)
		a := w.childByField(n, kinds.fieldArguments)
		if f == noNode || w.cat(f) != catIdentifier || w.text(f) != "super" || w.bindsCached("super") {
			return false
		}
		return a != noNode && w.namedCount(a) == 0
	case catIdentifier:
		name := w.text(n)
		if w.t.safeBuiltins[name] && !w.bindsCached(name) {
			return true
		}
		return w.boundOnlyByClass(name)
	}
	return false
}

// boundOnlyByClass reports whether the body binds name and every binding
// is a class statement.
func (w *walker) boundOnlyByClass(name string) bool {
	return memo(&w.classBound, name, w.scanBoundOnlyByClass)
}

func (w *walker) scanBoundOnlyByClass(name string) bool {
	found := false
	for i := range w.nodes {
		n := node(i)
		if w.cat(n) != catIdentifier || identText(w.src[w.start(n):w.end(n)]) != name || !w.isBinding(n) {
			continue
		}
		if p := w.parent(n); p == noNode || w.cat(p) != catClassDef {
			return false
		}
		found = true
	}
	return found
}

// bindsImport reports whether an import statement of the body binds name.
func (w *walker) bindsImport(name string) bool {
	return memo(&w.importBound, name, w.scanBindsImport)
}

// memo returns f(name), remembered in *m for the walk.
func memo(m *map[string]bool, name string, f func(string) bool) bool {
	if v, ok := (*m)[name]; ok {
		return v
	}
	if *m == nil {
		*m = map[string]bool{}
	}
	v := f(name)
	(*m)[name] = v
	return v
}

// moduleOf returns the module expression n names: an identifier that only
// import statements bind, all to the same module (import io, import
// urllib.parse as p, from urllib import parse), or a reviewed submodule
// attribute of one (urllib.parse); "" otherwise.
func (w *walker) moduleOf(n node) string {
	switch w.cat(n) {
	case catIdentifier:
		return w.importedModule(w.text(n))
	case catAttribute:
		// remembered per node: each node of a long chain (a.b.c...) asks
		// for its object's
		if m, ok := w.attrModules[n]; ok {
			return m
		}
		m := w.moduleOf(w.childByField(n, kinds.fieldObject))
		a := w.childByField(n, kinds.fieldAttribute)
		p := ""
		if m != "" && a != noNode && w.t.ModuleSurfaces[m+"."+w.text(a)] != nil {
			p = m + "." + w.text(a)
		}
		if w.attrModules == nil {
			w.attrModules = map[node]string{}
		}
		w.attrModules[n] = p
		return p
	}
	return ""
}

// importedModule is moduleOf for a name, remembered for the walk.
func (w *walker) importedModule(name string) string {
	if m, ok := w.modules[name]; ok {
		return m
	}
	if w.modules == nil {
		w.modules = map[string]string{}
	}
	m := w.scanImportedModule(name)
	w.modules[name] = m
	return m
}

func (w *walker) scanImportedModule(name string) string {
	mod := ""
	for i := range w.nodes {
		n := node(i)
		if w.cat(n) != catIdentifier || identText(w.src[w.start(n):w.end(n)]) != name || !w.isBinding(n) {
			continue
		}
		m, ok := w.importBinding(n)
		if !ok || m == "" || (mod != "" && m != mod) {
			return ""
		}
		mod = m
	}
	return mod
}

// importBinding returns the module the binding identifier n binds, and
// whether an import statement binds it at all (a relative import binds no
// module).
func (w *walker) importBinding(n node) (string, bool) {
	p := w.parent(n)
	alias := noNode
	if p != noNode && w.cat(p) == catAliasedImport {
		alias, p = p, w.parent(p)
	} else if p != noNode && w.cat(p) == catDottedName {
		p = w.parent(p)
		if p != noNode && w.cat(p) == catAliasedImport {
			return "", false
		}
	}
	if p == noNode {
		return "", false
	}
	switch w.cat(p) {
	case catImport:
		if alias != noNode {
			if d := w.childByField(alias, kinds.fieldName); d != noNode {
				return w.text(d), true
			}
			return "", true
		}
		return w.text(n), true
	case catImportFrom, catFutureImport:
		from := w.childByField(p, kinds.fieldModule)
		if from == noNode || w.cat(from) != catDottedName {
			return "", true
		}
		imported := w.text(n)
		if alias != noNode {
			if d := w.childByField(alias, kinds.fieldName); d != noNode {
				imported = w.text(d)
			}
		}
		if m := w.text(from) + "." + imported; w.t.ModuleSurfaces[m] != nil {
			return m, true
		}
		return "", true
	}
	return "", false
}

// checkSurface refuses m.name (and from m import name) of an allowed module
// m with a reviewed surface that does not hold name, saying what it holds
// (a submodule allowed by name is the runner's to serve: checkSubmodule).
func (w *walker) checkSurface(n node, m, name string) {
	surface, ok := w.t.ModuleSurfaces[m]
	top, _, _ := strings.Cut(m, ".")
	if !ok || slices.Contains(surface, name) || strings.HasPrefix(name, "_") || w.t.attrRule(name) != "" || !w.allowed[top] || w.allowed[m+"."+name] {
		return
	}
	offer := slices.Sorted(slices.Values(surface))
	more := ""
	if len(offer) > 12 {
		offer, more = offer[:12], ", ..."
	}
	w.add(w.t.ImportRules.NotInSurface, n, fmt.Sprintf("%s.%s is not available; %s offers %s%s", m, name, m, strings.Join(offer, ", "), more))
}

func (w *walker) scanBindsImport(name string) bool {
	for i := range w.nodes {
		n := node(i)
		if w.cat(n) != catIdentifier || identText(w.src[w.start(n):w.end(n)]) != name || !w.isBinding(n) {
			continue
		}
		// identifier < dotted_name / aliased_import < import statement
		for p, i := w.parent(n), 0; p != noNode && i < 3; p, i = w.parent(p), i+1 {
			if c := w.cat(p); c == catImport || c == catImportFrom || c == catFutureImport {
				return true
			}
		}
	}
	return false
}

func (w *walker) checkFormatCall(attr, object node, method string) {
	if object == noNode {
		return
	}
	// A literal template is checked here; any other is formatted at run
	// time by a formatter with the same rule (the runner's _orq_fmt).
	val, ok := w.literalValue(object, 0)
	if !ok {
		return
	}
	if bad, field := formatTraversal(val, 0); bad {
		w.add(w.t.FormatRule, attr, fmt.Sprintf("field %q reads an attribute or a private key", field))
	}
}

func (w *walker) visitSubscript(n node, depth int) {
	w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
		if fid == kinds.fieldSubscript {
			n := ch
			if val, ok := w.literalValue(n, 0); ok {
				if r := w.subscriptKeyRule(val); r != "" {
					w.add("dunder-subscript", n, fmt.Sprintf("%q", val))
					return true
				}
			}
		}
		w.visit(ch, depth+1, ctxNone, catSubscript)
		return true
	})
}

// subscriptKeyRule reports whether a string key is a name only namespaces
// are keyed by (a non-allowlisted dunder, a reserved name). Any other word
// is data.
func (w *walker) subscriptKeyRule(key string) string {
	if isDunder(key) && !w.t.dunderAllow[key] {
		return w.t.Dunder.AttributeRule
	}
	if w.reserved(key) {
		return w.t.ReservedPrefixes.Rule
	}
	return ""
}

// literalValue folds a string literal expression (a string without
// interpolations, implicit concatenation, parentheses, and '+' of such) into
// its value, as CPython's AST would show it.
func (w *walker) literalValue(n node, depth int) (string, bool) {
	if depth > 50 {
		return "", false
	}
	switch w.cat(n) {
	case catString, catConcatString:
		var b strings.Builder
		interp := false
		ok := w.decodeStringNode(n, &b, &interp, nil)
		return b.String(), ok && !interp
	case catParenthesized:
		inner := noNode
		cnt := 0
		for ch := range w.namedChildren(n) {
			if w.cat(ch) == catComment {
				continue
			}
			inner = ch
			cnt++
		}
		if cnt != 1 {
			return "", false
		}
		return w.literalValue(inner, depth+1)
	case catBinaryOperator:
		op := w.childByField(n, kinds.fieldOperator)
		if op == noNode || w.text(op) != "+" {
			return "", false
		}
		l, r := w.childByField(n, kinds.fieldLeft), w.childByField(n, kinds.fieldRight)
		if l == noNode || r == noNode {
			return "", false
		}
		a, ok1 := w.literalValue(l, depth+1)
		if !ok1 {
			return "", false
		}
		b, ok2 := w.literalValue(r, depth+1)
		if !ok2 {
			return "", false
		}
		return a + b, true
	}
	return "", false
}

// decodeStringNode appends the decoded literal text of a string or
// concatenated_string node to b; each interpolation contributes a '{'
// (a word breaker) and sets *interp. visitInterp, when not nil, is called
// for every interpolation node. It reports false when an escape is invalid.
func (w *walker) decodeStringNode(n node, b *strings.Builder, interp *bool, visitInterp func(node)) bool {
	ok := true
	if w.cat(n) == catConcatString {
		for ch := range w.children(n) {
			if w.cat(ch) == catString {
				if !w.decodeStringNode(ch, b, interp, visitInterp) {
					ok = false
				}
			}
		}
		return ok
	}
	var pfx prefix
	for ch := range w.children(n) {
		switch w.cat(ch) {
		case catStringStart:
			var good bool
			pfx, good = parsePrefix(w.text(ch))
			if !good {
				ok = false
			}
		case catStringContent:
			s, good := decodePy(w.text(ch), pfx)
			if !good {
				ok = false
			}
			b.WriteString(s)
		case catInterpolation:
			*interp = true
			b.WriteByte('{')
			if visitInterp != nil {
				visitInterp(ch)
			}
		case catEscapeInterpolation:
			b.WriteString(w.text(ch)[:1])
		}
	}
	return ok
}

// visitString checks a string or concatenated string: escapes must decode,
// and f-string interpolations must be valid Python 3.11 and are walked. The
// text itself is data (checkCall checks strings Python reads as attribute
// names).
func (w *walker) visitString(n node, depth int, cat category) {
	var b strings.Builder
	interp := false
	ok := w.decodeStringNode(n, &b, &interp, func(in node) {
		w.checkInterpolation(in)
		w.visit(in, depth+2, ctxNone, catString)
	})
	if !ok {
		w.add(RuleParseError, n, "invalid string literal (prefix or escape sequence)")
	}
}

// checkInterpolation enforces Python 3.11's f-string rules that tree-sitter's
// grammar (which follows 3.12) does not: no backslash in the replacement
// field, no '#' and no reuse of the enclosing quote in the expression, and
// no line break in a single-quoted f-string.
func (w *walker) checkInterpolation(in node) {
	p := w.parent(in)
	if p == noNode {
		return
	}
	var quote string
	for ch := range w.children(p) {
		if w.cat(ch) == catStringStart {
			s := w.text(ch)
			quote = strings.TrimLeft(s, "rRbBuUfF")
			break
		}
	}
	full := w.text(in)
	exprEnd := w.end(in)
	for ch := range w.children(in) {
		if k := w.kindName(ch); k == "type_conversion" || k == "format_specifier" {
			exprEnd = w.start(ch)
			break
		}
	}
	expr := w.outsideStrings(in, w.start(in), exprEnd)
	switch {
	case strings.Contains(full, "\\"):
		w.add(RuleParseError, in, "f-string expression part cannot include a backslash (Python 3.11)")
	case strings.Contains(expr, "#"):
		w.add(RuleParseError, in, "f-string expression part cannot include '#' (Python 3.11)")
	case quote != "" && strings.Contains(full, quote[:1]) && (len(quote) == 1 || strings.Contains(full, quote)):
		w.add(RuleParseError, in, "f-string expression reuses the enclosing quote (Python 3.11)")
	case len(quote) == 1 && strings.Contains(full, "\n"):
		w.add(RuleParseError, in, "line break in a single-quoted f-string (Python 3.11)")
	}
}

// outsideStrings returns src[start:end] with the string literals nested
// under n blanked out: CPython 3.11 refuses a '#' in an f-string's
// expression, but not inside a string literal there (f"{'#' * 3}").
func (w *walker) outsideStrings(n node, start, end uint) string {
	b := []byte(string(w.src[start:end]))
	var blank func(m node)
	blank = func(m node) {
		for ch := range w.children(m) {
			if c := w.cat(ch); c == catString || c == catConcatString {
				for i := max(w.start(ch), start); i < min(w.end(ch), end); i++ {
					b[i-start] = ' '
				}
				continue
			}
			blank(ch)
		}
	}
	blank(n)
	return string(b)
}

// formatTraversal reports whether a str.format template has a replacement
// field whose name reads an attribute ('.') or an index key starting with
// '_' ([_x]), at any nesting level of format specs; index keys into data
// ({row[name]}) pass. Malformed templates count as traversal (fail closed).
func formatTraversal(s string, depth int) (bool, string) {
	if depth > 4 {
		return true, s
	}
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				i += 2
				continue
			}
			return true, "}" // single '}' is malformed
		}
		if c != '{' {
			i++
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			i += 2
			continue
		}
		// find the matching '}'
		lvl := 1
		j := i + 1
		for j < len(s) && lvl > 0 {
			switch s[j] {
			case '{':
				lvl++
			case '}':
				lvl--
			}
			j++
		}
		if lvl != 0 {
			return true, s[i:]
		}
		field := s[i+1 : j-1]
		// field name: up to the first ':' or '!' outside brackets, as
		// CPython's parse_field reads it
		k := -1
	name:
		for p := 0; p < len(field); p++ {
			switch field[p] {
			case '.', '{':
				return true, field
			case '[':
				q := strings.IndexByte(field[p:], ']')
				if q < 0 {
					return true, field
				}
				if key := field[p+1 : p+q]; strings.HasPrefix(key, "_") {
					return true, field
				}
				p += q
			case ':', '!':
				k = p
				break name
			}
		}
		if k >= 0 {
			rest := field[k:]
			if ci := strings.IndexByte(rest, ':'); ci >= 0 {
				if bad, f := formatTraversal(rest[ci+1:], depth+1); bad {
					return true, f
				}
			}
		}
		i = j
	}
	return false, ""
}

func badInteger(s string) bool {
	if len(s) < 2 || s[0] != '0' {
		return false
	}
	switch s[1] {
	case 'x', 'X', 'o', 'O', 'b', 'B':
		return false
	}
	nonzero := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '_' || c == '0':
		case c >= '1' && c <= '9':
			nonzero = true
		default:
			return false // j suffix etc.: not a plain decimal integer
		}
	}
	return nonzero
}

// checkParameters enforces what CPython's grammar requires of a parameter
// list and tree-sitter's does not: no non-default parameter after a default
// one (before '*'), and a bare '*' must be followed by a named parameter.
func (w *walker) checkParameters(n node) {
	seenDefault, seenStar, pendingKw := false, false, false
	for ch := range w.namedChildren(n) {
		switch w.cat(ch) {
		case catListSplatPattern:
			seenStar = true
		case catIdentifier, catPositionalParam, catTargetContainer:
			if seenDefault && !seenStar {
				w.add(RuleParseError, ch, "non-default argument follows default argument")
			}
			pendingKw = false
		case catDefaultParameter:
			if !seenStar {
				seenDefault = true
			}
			pendingKw = false
		case catKeywordSeparator:
			seenStar, pendingKw = true, true
		case catDictSplatPattern:
			if pendingKw {
				w.add(RuleParseError, ch, "named arguments must follow bare *")
				pendingKw = false
			}
		}
	}
	if pendingKw {
		w.add(RuleParseError, n, "named arguments must follow bare *")
	}
}

// checkArguments enforces call-argument order: no positional argument after
// a keyword argument or '**', no '*' after '**'.
func (w *walker) checkArguments(n node) {
	seenKw, seenDict := false, false
	for ch := range w.namedChildren(n) {
		switch w.cat(ch) {
		case catComment:
		case catKeywordArgument:
			seenKw = true
		case catDictionarySplat:
			seenDict = true
		case catListSplat:
			if seenDict {
				w.add(RuleParseError, ch, "iterable argument unpacking follows keyword argument unpacking")
			}
		default:
			if seenKw || seenDict {
				w.add(RuleParseError, ch, "positional argument follows keyword argument")
			}
		}
	}
}

func (w *walker) validDelTarget(n node, depth int) bool {
	if depth > 50 {
		return false
	}
	switch w.cat(n) {
	case catIdentifier, catAttribute, catSubscript, catComment:
		return true
	case catTargetContainer, catParenthesized:
		switch w.kindName(n) {
		case "tuple", "list", "expression_list", "parenthesized_expression":
		default:
			return false
		}
		for ch := range w.namedChildren(n) {
			if !w.validDelTarget(ch, depth+1) {
				return false
			}
		}
		return true
	}
	return false
}

// logicalStarters are the node kinds that start a logical line besides
// the statements of a block or of the module.
var logicalStarters = map[string]bool{
	"elif_clause": true, "else_clause": true, "except_clause": true, "except_group_clause": true,
	"finally_clause": true, "case_clause": true, "decorator": true,
}

// checkIndentation applies CPython's tab consistency check (TabError
// "inconsistent use of tabs and spaces in indentation"): the indentation of
// each logical line is measured twice, with tabs to 8 columns and to 1, and
// both measures must order the lines' indentation levels alike. A block
// indented with tabs next to one indented with spaces passes, as in CPython.
func (w *walker) checkIndentation() {
	if !hasTabs(w.src) {
		return // no tab anywhere: both measures agree
	}
	var starts []int
	lastLine := -1
	for i := range w.nodes {
		n := node(i)
		if !w.named(n) || w.cat(n) == catComment {
			continue
		}
		p := w.parent(n)
		if p == noNode {
			continue
		}
		pk := w.kindName(p)
		if !(w.cat(p) == catBlock || pk == "module" || logicalStarters[w.kindName(n)] ||
			(pk == "decorated_definition" && w.nodes[n].field == kinds.fieldDefinition)) {
			continue
		}
		off := int(w.start(n))
		ls := off
		for ls > 0 && w.src[ls-1] != '\n' {
			ls--
		}
		if ls == lastLine || !onlyIndent(w.src[ls:off]) {
			continue
		}
		lastLine = ls
		starts = append(starts, ls)
	}
	slices.Sort(starts)
	cols, alts := []int{0}, []int{0}
	for _, ls := range starts {
		col, alt := 0, 0
		for k := ls; k < len(w.src); k++ {
			switch w.src[k] {
			case ' ':
				col++
				alt++
				continue
			case '\t':
				col = (col/8 + 1) * 8
				alt++
				continue
			case '\f':
				col, alt = 0, 0
				continue
			}
			break
		}
		top := len(cols) - 1
		bad := false
		switch {
		case col == cols[top]:
			bad = alt != alts[top]
		case col > cols[top]:
			bad = alt <= alts[top]
			cols, alts = append(cols, col), append(alts, alt)
		default:
			for top > 0 && col < cols[top] {
				top--
			}
			cols, alts = cols[:top+1], alts[:top+1]
			bad = col == cols[top] && alt != alts[top]
		}
		if bad {
			w.addAt(RuleParseError, uint(ls), uint(ls), "inconsistent use of tabs and spaces in indentation")
			return
		}
	}
}

func onlyIndent(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\f' {
			return false
		}
	}
	return true
}

func hasTabs(b []byte) bool {
	for _, c := range b {
		if c == '\t' {
			return true
		}
	}
	return false
}

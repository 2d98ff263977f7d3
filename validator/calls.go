package validator

import (
	"fmt"
	"strings"

	"github.com/orqest/sandbox/rules"
)

// classCheckCalls are the builtins whose second argument is a class (or a
// tuple of classes): `type` may appear there (builtin_shapes
// "one-argument-or-class-check").
var classCheckCalls = map[string]bool{"isinstance": true, "issubclass": true}

// checkCall applies the rules that depend on a call's shape, before its
// children are walked: string literals Python reads as attribute names
// (attribute_name_calls), and the shapes in which a reflection builtin is
// allowed (builtin_shapes), whose callee identifiers it marks in w.shaped.
func (w *walker) checkCall(n node) {
	fn := w.childByField(n, kinds.fieldFunction)
	args := w.childByField(n, kinds.fieldArguments)
	if fn == noNode || args == noNode {
		return
	}
	// f(x for x in y): the generator is the one positional argument.
	genArg := w.kindName(args) == "generator_expression"
	if !genArg && w.cat(args) != catArgumentList {
		return
	}
	var name string
	switch w.cat(fn) {
	case catIdentifier:
		name = identText(w.src[w.start(fn):w.end(fn)])
	case catAttribute:
		if a := w.childByField(fn, kinds.fieldAttribute); a != noNode {
			name = identText(w.src[w.start(a):w.end(a)])
		}
	}
	if name == "" {
		return
	}
	var pos []node
	plain := true // no keyword argument, no * or ** unpacking
	if genArg {
		pos = append(pos, args)
	}
	for ch := range w.namedChildren(args) {
		if genArg {
			break
		}
		switch w.cat(ch) {
		case catComment:
		case catKeywordArgument, catListSplat, catDictionarySplat:
			plain = false
		default:
			pos = append(pos, ch)
		}
	}
	if w.t.attrNameCalls[name] && !genArg {
		w.checkAttributeNameArgs(args, name == "hasattr")
	}
	if w.cat(fn) != catIdentifier || !plain {
		return
	}
	switch w.t.BuiltinShapes[name] {
	case rules.ShapeLiteralAttribute:
		if len(pos) == 2 || len(pos) == 3 {
			if v, ok := w.literalValue(pos[1], 0); ok && plainIdentifier(v) && w.t.attrRule(v) == "" && !w.t.formatMethods[v] {
				w.mark(fn)
			}
		}
	case rules.ShapeOneArgOrClassCheck:
		if len(pos) == 1 {
			w.mark(fn)
		}
	case rules.ShapeGuardedCall:
		w.mark(fn)
	}
	if classCheckCalls[name] && len(pos) == 2 {
		cls := pos[1]
		if w.kindName(cls) == "tuple" {
			for el := range w.namedChildren(cls) {
				w.markClassArg(el)
			}
		} else {
			w.markClassArg(cls)
		}
	}
}

func (w *walker) markClassArg(n node) {
	if w.cat(n) != catIdentifier {
		return
	}
	if w.t.BuiltinShapes[identText(w.src[w.start(n):w.end(n)])] == rules.ShapeOneArgOrClassCheck {
		w.mark(n)
	}
}

func (w *walker) mark(n node) {
	if w.shaped == nil {
		w.shaped = map[node]bool{}
	}
	w.shaped[n] = true
}

// checkAttributeNameArgs refuses string literals among a call's arguments
// (directly, as a keyword value, or as an element of a list, tuple or set
// display) with a dotted part the attribute rules forbid; test (hasattr)
// lets a classes.hasattr_dunders name through.
func (w *walker) checkAttributeNameArgs(args node, test bool) {
	check := func(n node) {
		v, ok := w.literalValue(n, 0)
		if !ok {
			return
		}
		for _, part := range strings.Split(v, ".") {
			if test && w.t.hasattrDunder[part] {
				continue
			}
			if w.t.attrRule(part) != "" {
				w.add(rules.RuleForbiddenString, n, fmt.Sprintf("%q", part))
				return
			}
			if w.t.formatMethods[part] {
				w.add(w.t.FormatRule, n, fmt.Sprintf("%q read by name formats a template at run time", part))
				return
			}
		}
	}
	for ch := range w.namedChildren(args) {
		v := ch
		if w.cat(ch) == catKeywordArgument {
			if v = w.childByField(ch, kinds.fieldValue); v == noNode {
				continue
			}
		}
		switch w.kindName(v) {
		case "list", "tuple", "set":
			for el := range w.namedChildren(v) {
				check(el)
			}
		default:
			check(v)
		}
	}
}

// plainIdentifier reports whether s is an ASCII Python identifier.
func plainIdentifier(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isWordByte(s[i]) {
			return false
		}
	}
	return true
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

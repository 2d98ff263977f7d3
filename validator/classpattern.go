package validator

import "slices"

// checkClassPattern refuses a class pattern with positional sub-patterns
// (case C(a)) unless C is a builtin type that matches the subject itself
// (rules.json match_self_types) and the body never rebinds that name, or,
// with classes on, a class the body defines and binds no other way:
// positional patterns read the attributes named by C.__match_args__, which
// whoever can set an attribute on C controls.
func (w *walker) checkClassPattern(n node) {
	cls, positional := noNode, false
	w.eachChild(n, func(ch node, fid uint16, ccat category) bool {
		switch {
		case cls == noNode && ccat == catDottedName:
			cls = ch
		case w.kindName(ch) == "case_pattern":
			positional = true
		}
		return true
	})
	if !positional || cls == noNode {
		return
	}
	name := w.text(cls)
	if slices.Contains(w.t.MatchSelfTypes, name) && !w.binds(name) {
		return
	}
	// A class the body defines: its __match_args__ comes from its own
	// body (a dunder name nobody may bind) or from dataclass's field names.
	if w.classes && w.boundOnlyByClass(name) {
		return
	}
	w.add(w.t.ClassPatternRule, n, "case "+name+"(...)")
}

// targetContainers are the node kinds an assignment target nests names in
// (a, (b, *c)) = ...; binds looks through them to the binding construct.
var targetContainers = map[string]bool{
	"pattern_list": true, "tuple_pattern": true, "list_pattern": true, "tuple": true, "list": true,
	"parenthesized_expression": true, "expression_list": true, "list_splat_pattern": true,
	"list_splat": true, "dictionary_splat_pattern": true,
}

// captureParents are the pattern kinds under which a one-part dotted name
// is a capture (case x, case P(a=x), case [*rest]).
var captureParents = map[string]bool{
	"case_pattern": true, "keyword_pattern": true, "splat_pattern": true, "as_pattern": true,
}

// isBinding reports whether identifier n is a name being bound: an
// assignment, loop or comprehension target, a walrus name, a parameter, a
// def or class name, an import name, an except/with/pattern alias or a
// pattern capture. global/nonlocal declarations and del are not bindings
// here. The same positions as the in-child checker's bound_names.
func (w *walker) isBinding(n node) bool {
	p := w.parent(n)
	if p == noNode {
		return false
	}
	if w.cat(p) == catDottedName {
		first := p + 1
		for first < node(w.nodes[p].next) && w.cat(first) != catIdentifier {
			first = node(w.nodes[first].next)
		}
		pp := w.parent(p)
		if pp == noNode {
			return false
		}
		switch k := w.kindName(pp); {
		case k == "import_statement":
			return n == first
		case k == "import_from_statement":
			return w.nodes[p].field == kinds.fieldName
		case k == "aliased_import":
			return false // the alias binds, not the dotted name
		case captureParents[k]:
			return w.namedCount(p) == 1
		}
		return false
	}
	child := n
	for targetContainers[w.kindName(p)] {
		child = p
		if p = w.parent(p); p == noNode {
			return false
		}
	}
	f := w.nodes[child].field
	switch w.kindName(p) {
	case "assignment", "augmented_assignment", "for_statement", "for_in_clause":
		return f == kinds.fieldLeft
	case "named_expression", "default_parameter", "typed_default_parameter", "function_definition", "class_definition":
		return f == kinds.fieldName
	case "except_clause", "aliased_import":
		return f == kinds.fieldAlias
	case "parameters", "lambda_parameters", "typed_parameter", "as_pattern_target":
		return true
	}
	return false
}

func (w *walker) namedCount(n node) int {
	c := 0
	for range w.namedChildren(n) {
		c++
	}
	return c
}

// binds reports whether the body binds name anywhere (isBinding).
func (w *walker) binds(name string) bool {
	for i := range w.nodes {
		n := node(i)
		if w.cat(n) == catIdentifier && identText(w.src[w.start(n):w.end(n)]) == name && w.isBinding(n) {
			return true
		}
	}
	return false
}

// bindsCached is binds, remembered per walk.
func (w *walker) bindsCached(name string) bool { return memo(&w.bound, name, w.binds) }

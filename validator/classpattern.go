package validator

import "slices"

// checkClassPattern refuses a class pattern with positional sub-patterns
// (case C(a)) unless C is a builtin type that matches the subject itself
// (rules.json match_self_types) and the body never rebinds that name:
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
	w.add(w.t.ClassPatternRule, n, "case "+name+"(...)")
}

// bindingParents are the node kinds under which an identifier is a name
// being bound (or may be: the check errs on the side of "bound").
var bindingParents = map[string]bool{
	"assignment": true, "augmented_assignment": true, "pattern_list": true, "tuple_pattern": true,
	"list_pattern": true, "for_statement": true, "for_in_clause": true, "named_expression": true,
	"parameters": true, "lambda_parameters": true, "default_parameter": true, "typed_parameter": true,
	"typed_default_parameter": true, "list_splat_pattern": true, "dictionary_splat_pattern": true,
	"aliased_import": true, "as_pattern_target": true, "as_pattern": true, "function_definition": true,
	"class_definition": true, "global_statement": true, "nonlocal_statement": true, "case_pattern": true,
	"keyword_pattern": true, "splat_pattern": true, "with_item": true, "except_clause": true,
	"import_from_statement": true, "import_statement": true, "dict_pattern": true,
}

// binds reports whether the body may bind name anywhere: an identifier
// with that text under a binding construct (directly, or in a dotted name
// directly under one: pattern captures and imports).
func (w *walker) binds(name string) bool {
	for i := range w.nodes {
		n := node(i)
		if w.cat(n) != catIdentifier || w.text(n) != name {
			continue
		}
		p := w.parent(n)
		if p == noNode {
			continue
		}
		if w.cat(p) == catDottedName {
			if p = w.parent(p); p == noNode {
				continue
			}
		}
		if bindingParents[w.kindName(p)] {
			return true
		}
	}
	return false
}

package validator

import "iter"

// node is a syntax-tree node: an index into walker.nodes (the tree flattened
// in pre-order by flat.go). Every accessor below is plain Go on that array;
// none crosses into C.
type node int32

const noNode node = -1

func (w *walker) start(n node) uint      { return uint(w.nodes[n].start) }
func (w *walker) end(n node) uint        { return uint(w.nodes[n].end) }
func (w *walker) cat(n node) category    { return kinds.cat[w.nodes[n].kind] }
func (w *walker) named(n node) bool      { return w.nodes[n].flags&flagNamed != 0 }
func (w *walker) missing(n node) bool    { return w.nodes[n].flags&flagMissing != 0 }
func (w *walker) kindName(n node) string { return kinds.name(w.nodes[n].kind) }

// parent returns n's parent, or noNode for the root.
func (w *walker) parent(n node) node {
	if p := w.nodes[n].parent; p != noParent {
		return node(p)
	}
	return noNode
}

// children yields n's children (named and anonymous) in order.
func (w *walker) children(n node) iter.Seq[node] {
	return func(yield func(node) bool) {
		for ch, end := n+1, node(w.nodes[n].next); ch < end; ch = node(w.nodes[ch].next) {
			if !yield(ch) {
				return
			}
		}
	}
}

// namedChildren yields n's named children in order.
func (w *walker) namedChildren(n node) iter.Seq[node] {
	return func(yield func(node) bool) {
		for ch, end := n+1, node(w.nodes[n].next); ch < end; ch = node(w.nodes[ch].next) {
			if w.nodes[ch].flags&flagNamed != 0 && !yield(ch) {
				return
			}
		}
	}
}

// childByField returns n's first child in the given field, or noNode
// (ts_node_child_by_field_id; TestFlatMatchesGoTreeSitter checks they agree).
func (w *walker) childByField(n node, field uint16) node {
	if field == 0 {
		return noNode
	}
	for ch, end := n+1, node(w.nodes[n].next); ch < end; ch = node(w.nodes[ch].next) {
		if w.nodes[ch].field == field {
			return ch
		}
	}
	return noNode
}

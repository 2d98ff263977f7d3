package validator

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// CPython's tokenizer refuses a non-printable character anywhere but inside
// a string's text or a comment ("invalid non-printable character U+000B"),
// while tree-sitter's grammar reads several of them as whitespace: the
// vertical tab, U+00A0, U+2028, the zero-width space U+200B, a byte-order
// mark (also a leading one: the runner compiles a str, and a str keeps its
// BOM). checkPrintable makes the Go checker refuse what CPython refuses, so
// the validator's verdict is the interpreter's.

// nonPrintable reports whether CPython refuses r outside strings and comments
// as non-printable: the ASCII controls but tab, line feed, carriage return
// and form feed, DEL, and every other rune Go does not count as printable
// (which leaves out every space but U+0020, and the format characters).
func nonPrintable(r rune) bool {
	if r < utf8.RuneSelf {
		switch {
		case r == '\t' || r == '\n' || r == '\r' || r == '\f':
			return false
		case r < 0x20 || r == 0x7f:
			return true
		}
		return false
	}
	return !unicode.IsPrint(r)
}

// checkPrintable adds a parse-error finding for the first non-printable
// character outside a string's text or a comment. It reads the source once
// and, only when it meets such a character, the string and comment spans in
// source order, so the cost stays linear however many there are.
func (w *walker) checkPrintable() {
	var spans [][2]uint32 // string_content and comment nodes, by start
	built, j := false, 0
	for i := 0; i < len(w.src); {
		b := w.src[i]
		if b >= 0x20 && b < 0x7f || b == '\n' {
			i++
			continue
		}
		r, size := utf8.DecodeRune(w.src[i:])
		if !nonPrintable(r) {
			i += size
			continue
		}
		if !built {
			spans, built = w.textSpans(), true
		}
		off := uint32(i)
		for j < len(spans) && spans[j][1] <= off {
			j++
		}
		if j == len(spans) || off < spans[j][0] {
			w.addAt(RuleParseError, uint(i), uint(i+size), fmt.Sprintf(
				"invalid non-printable character U+%04X; delete it, or write it as an escape (\"\\u%04x\") inside a string", r, r))
			return
		}
		i += size
	}
}

// textSpans returns the byte spans of the string_content and comment nodes,
// where CPython takes any character, in source order (the nodes are stored
// in pre-order and neither kind contains the other).
func (w *walker) textSpans() [][2]uint32 {
	var spans [][2]uint32
	for i := range w.nodes {
		n := &w.nodes[i]
		if c := kinds.cat[n.kind]; c == catStringContent || c == catComment {
			spans = append(spans, [2]uint32{n.start, n.end})
		}
	}
	return spans
}

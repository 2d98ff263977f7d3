package validator

import (
	"context"
	"strings"
	"testing"
	"time"

	ts "github.com/tree-sitter/go-tree-sitter"
)

// flatCorpus is every test body plus the benchmark bodies and some broken
// inputs (ERROR and MISSING nodes).
func flatCorpus() []string {
	var out []string
	for _, cs := range [][]tcase{attacks, benign, extraDiff} {
		for _, c := range cs {
			out = append(out, c.code)
		}
	}
	return append(out, body2KB, body50KB(), "", "x = (1,", "def f(:\n  pass", "if x:\n",
		"f(a=1, 2)\n", "\tx = 1\n        y = 2\n", "x = '\\N{", strings.Repeat("(", 300)+"1"+strings.Repeat(")", 299),
		"match x:\n case {'a': b, **rest}: pass\n case C(x=1) as y: pass\n")
}

// TestFlatMatchesGoTreeSitter checks the one-call flattening (flat.go)
// against go-tree-sitter's own cursor and node API on the same source:
// same nodes in the same order, same kind ids, byte ranges, field ids,
// flags, parents, and the same answers to ChildByFieldName and
// DescendantForByteRange. It fails loudly if the copied tree_sitter/api.h
// or orq_node drift from the library go-tree-sitter compiles in.
func TestFlatMatchesGoTreeSitter(t *testing.T) {
	gp := ts.NewParser()
	defer gp.Close()
	if err := gp.SetLanguage(language); err != nil {
		t.Fatal(err)
	}
	p := newParser()
	defer p.close()
	fields := map[string]uint16{"left": kinds.fieldLeft, "right": kinds.fieldRight, "operator": kinds.fieldOperator,
		"name": kinds.fieldName, "object": kinds.fieldObject, "attribute": kinds.fieldAttribute,
		"module_name": kinds.fieldModule, "alias": kinds.fieldAlias, "subscript": kinds.fieldSubscript}
	for ci, code := range flatCorpus() {
		src := normalizeNewlines(code)
		gt := gp.Parse(src, nil)
		ct, ok := p.parse(src, false, 0, nil)
		if !ok {
			t.Fatalf("case %d: parse failed", ci)
		}
		w := &walker{nodes: p.flatten(ct), tree: ct, src: src}

		// Walk go-tree-sitter's tree in pre-order beside the flat array.
		c := gt.Walk()
		var stack []node // flat index of each ancestor on the cursor's path
		i := node(0)
		for {
			n := c.Node()
			if int(i) >= len(w.nodes) {
				t.Fatalf("case %d: flat tree has fewer nodes than go-tree-sitter's", ci)
			}
			f := w.nodes[i]
			wantParent := noParent
			if len(stack) > 0 {
				wantParent = uint32(stack[len(stack)-1])
			}
			if uint(f.start) != n.StartByte() || uint(f.end) != n.EndByte() || f.kind != n.KindId() ||
				f.field != c.FieldId() || w.named(i) != n.IsNamed() || w.missing(i) != n.IsMissing() ||
				(f.flags&flagHasError != 0) != n.HasError() || (f.flags&flagExtra != 0) != n.IsExtra() ||
				f.parent != wantParent || w.kindName(i) != n.Kind() {
				t.Fatalf("case %d node %d: flat %+v (%s) vs go-tree-sitter %s [%d,%d) field %d parent %d",
					ci, i, f, w.kindName(i), n.Kind(), n.StartByte(), n.EndByte(), c.FieldId(), wantParent)
			}
			for name, fid := range fields {
				got, want := w.childByField(i, fid), n.ChildByFieldName(name)
				if (got == noNode) != (want == nil) || (want != nil && (w.start(got) != want.StartByte() ||
					w.end(got) != want.EndByte() || w.nodes[got].kind != want.KindId())) {
					t.Fatalf("case %d node %d (%s): field %q differs", ci, i, n.Kind(), name)
				}
			}
			var named, all uint
			for range w.namedChildren(i) {
				named++
			}
			for range w.children(i) {
				all++
			}
			if named != n.NamedChildCount() || all != n.ChildCount() {
				t.Fatalf("case %d node %d (%s): %d/%d children, want %d/%d", ci, i, n.Kind(), named, all, n.NamedChildCount(), n.ChildCount())
			}
			i++
			if c.GotoFirstChild() {
				stack = append(stack, i-1)
				continue
			}
			if f.next != uint32(i) {
				t.Fatalf("case %d node %d: leaf next = %d", ci, i-1, f.next)
			}
			for !c.GotoNextSibling() {
				if !c.GotoParent() {
					goto done
				}
				top := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if w.nodes[top].next != uint32(i) {
					t.Fatalf("case %d node %d: next = %d, want %d", ci, top, w.nodes[top].next, i)
				}
			}
		}
	done:
		c.Close()
		if int(i) != len(w.nodes) {
			t.Fatalf("case %d: flat tree has %d nodes, go-tree-sitter %d", ci, len(w.nodes), i)
		}
		// insideString's C lookup against go-tree-sitter's node API.
		root := gt.RootNode()
		for off := 0; off <= len(src); off += 1 + off/64 {
			var want []uint16
			n := root.DescendantForByteRange(uint(off), uint(off))
			for d := 0; n != nil && d < 200; d++ {
				want = append(want, n.KindId())
				n = n.Parent()
			}
			got := ct.ancestorKinds(uint(off), w.ancBuf[:])
			if len(got) != len(want) {
				t.Fatalf("case %d offset %d: %d ancestors, want %d", ci, off, len(got), len(want))
			}
			for k := range got {
				if got[k] != want[k] {
					t.Fatalf("case %d offset %d: ancestor %d kind %d, want %d", ci, off, k, got[k], want[k])
				}
			}
		}
		ct.close()
		gt.Close()
		p.reset()
	}
}

// TestParseLimits: the C progress callback honours the time limit and a
// context cancelled while the parse runs, and a pooled parser works again
// afterwards.
func TestParseLimits(t *testing.T) {
	code := strings.Repeat("x = [a.b(c, d[e]) for a in range(10) if a]\n", 1400)
	v := New(WithTimeout(50 * time.Microsecond))
	for i := 0; i < 3; i++ {
		if fs := v.Check(context.Background(), code, nil); !hasRule(fs, RuleValidationTimeout) {
			t.Fatalf("want validation-timeout, got %v", rulesOf(fs))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Microsecond, cancel)
	if fs := New().Check(ctx, code, nil); !hasRule(fs, RuleValidationTimeout) {
		t.Fatalf("cancelled mid-parse: want validation-timeout, got %v", rulesOf(fs))
	}
	v2 := New()
	for i := 0; i < 3; i++ {
		if fs := v2.Check(context.Background(), code, nil); len(fs) != 0 {
			t.Fatalf("unlimited: %v", rulesOf(fs))
		}
	}
}

// TestNoCLeak: repeated checks (accepted, rejected, broken, timed out) do
// not grow the C heap: every tree and cursor is freed, and pooled parsers
// are reused.
func TestNoCLeak(t *testing.T) {
	v := New()
	vt := New(WithTimeout(20 * time.Microsecond))
	big := strings.Repeat("x = [a.b(c, d[e]) for a in range(10) if a]\n", 1000)
	run := func(n int) {
		for i := 0; i < n; i++ {
			v.Check(context.Background(), body2KB, benchAllow)
			v.Check(context.Background(), "import os\nx = (1,\n\tif y:\n", nil)
			v.Check(context.Background(), "s = 'a'\n\tt = f'{x!r:>{w}}'\n", nil)
			vt.Check(context.Background(), big, nil)
		}
	}
	run(50)
	before := cHeapInUse()
	run(500)
	if after := cHeapInUse(); after-before > 256<<10 {
		t.Fatalf("C heap grew by %d bytes over 500 rounds", after-before)
	}
}

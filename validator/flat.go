package validator

/*
#cgo CFLAGS: -I${SRCDIR}/tsinclude -std=c11 -D_POSIX_C_SOURCE=200112L
#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>
#include <malloc.h>
#include <tree_sitter/api.h>

// One syntax-tree node, as the Go walker reads it (flatNode in Go mirrors
// this layout; checkFlatLayout verifies it). Nodes are stored in pre-order,
// as a TSTreeCursor visits them, so a node's first child, if any, is the
// next element, and "next" is the index one past the node's subtree (its
// next sibling, when it has one).
typedef struct {
	uint32_t start_byte;
	uint32_t end_byte;
	uint32_t parent;   // index of the parent; UINT32_MAX for the root
	uint32_t next;     // index one past this node's subtree
	uint16_t symbol;   // ts_node_symbol: the kind id
	uint16_t field;    // ts_tree_cursor_current_field_id: field in the parent
	uint8_t  flags;    // ORQ_NAMED | ORQ_MISSING | ORQ_HAS_ERROR | ORQ_EXTRA
	uint8_t  pad[3];
} orq_node;

enum { ORQ_NAMED = 1, ORQ_MISSING = 2, ORQ_HAS_ERROR = 4, ORQ_EXTRA = 8 };

// The parse's time and cancellation limit, read by the progress callback.
// The Go side sets cancel from another goroutine (atomically).
typedef struct {
	int64_t deadline_ns; // CLOCK_MONOTONIC; 0 = none
	int32_t cancel;
	int32_t stopped;     // set when the callback ended the parse
} orq_ctl;

static int64_t orq_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool orq_progress(TSParseState *st) {
	orq_ctl *ctl = (orq_ctl *)st->payload;
	if (__atomic_load_n(&ctl->cancel, __ATOMIC_RELAXED) ||
	    (ctl->deadline_ns != 0 && orq_now_ns() > ctl->deadline_ns)) {
		ctl->stopped = 1;
		return true;
	}
	return false;
}

typedef struct { const char *s; uint32_t n; } orq_str;

static const char *orq_read(void *payload, uint32_t byte_index, TSPoint pos, uint32_t *bytes_read) {
	(void)pos;
	orq_str *s = (orq_str *)payload;
	if (byte_index >= s->n) {
		*bytes_read = 0;
		return "";
	}
	*bytes_read = s->n - byte_index;
	return s->s + byte_index;
}

// orq_parse parses n bytes of UTF-8 at src (the tree keeps no reference to
// src). With a ctl, the parse gives up (returns NULL, ctl->stopped = 1) once
// timeout_ns (> 0) has passed or ctl->cancel is set.
static TSTree *orq_parse(TSParser *p, const char *src, uint32_t n, orq_ctl *ctl, int64_t timeout_ns) {
	orq_str s = {src, n};
	TSInput in = {.payload = &s, .read = orq_read, .encoding = TSInputEncodingUTF8, .decode = NULL};
	TSParseOptions opts = {0};
	if (ctl != NULL) {
		ctl->deadline_ns = timeout_ns > 0 ? orq_now_ns() + timeout_ns : 0;
		ctl->stopped = 0;
		opts.payload = ctl;
		opts.progress_callback = orq_progress;
	}
	return ts_parser_parse_with_options(p, NULL, in, opts);
}

static uint32_t orq_node_count(const TSTree *t) {
	return ts_node_descendant_count(ts_tree_root_node(t));
}

// orq_flatten writes the tree's nodes in pre-order into out[0..cap) and
// returns how many there are; if that is more than cap it stops early and
// returns cap+1 (the caller grows the buffer and calls again).
static uint32_t orq_flatten(const TSTree *t, orq_node *out, uint32_t cap) {
	TSTreeCursor c = ts_tree_cursor_new(ts_tree_root_node(t));
	uint32_t n = 0, cur = UINT32_MAX;
	for (;;) {
		if (n >= cap) {
			ts_tree_cursor_delete(&c);
			return cap + 1;
		}
		TSNode node = ts_tree_cursor_current_node(&c);
		orq_node *o = &out[n];
		o->start_byte = ts_node_start_byte(node);
		o->end_byte = ts_node_end_byte(node);
		o->parent = cur;
		o->next = 0;
		o->symbol = ts_node_symbol(node);
		o->field = ts_tree_cursor_current_field_id(&c);
		o->flags = (ts_node_is_named(node) ? ORQ_NAMED : 0) |
		           (ts_node_is_missing(node) ? ORQ_MISSING : 0) |
		           (ts_node_has_error(node) ? ORQ_HAS_ERROR : 0) |
		           (ts_node_is_extra(node) ? ORQ_EXTRA : 0);
		o->pad[0] = o->pad[1] = o->pad[2] = 0;
		uint32_t idx = n++;
		if (ts_tree_cursor_goto_first_child(&c)) {
			cur = idx;
			continue;
		}
		out[idx].next = n;
		while (!ts_tree_cursor_goto_next_sibling(&c)) {
			if (cur == UINT32_MAX || !ts_tree_cursor_goto_parent(&c)) {
				ts_tree_cursor_delete(&c);
				return n;
			}
			out[cur].next = n;
			cur = out[cur].parent;
		}
	}
}

// orq_ancestors writes the kind ids of the smallest node spanning byte off
// (ts_node_descendant_for_byte_range) and of its ancestors, innermost
// first, at most max of them; it returns how many it wrote.
static uint32_t orq_ancestors(const TSTree *t, uint32_t off, uint16_t *out, uint32_t max) {
	TSNode n = ts_node_descendant_for_byte_range(ts_tree_root_node(t), off, off);
	uint32_t k = 0;
	while (!ts_node_is_null(n) && k < max) {
		out[k++] = ts_node_symbol(n);
		n = ts_node_parent(n);
	}
	return k;
}

// orq_heap_in_use is the bytes glibc's malloc has handed out (for the
// leak test; alloc.go routes tree-sitter's allocations to malloc).
static size_t orq_heap_in_use(void) {
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks;
}

static TSParser *orq_parser_new(const TSLanguage *l) {
	TSParser *p = ts_parser_new();
	if (!ts_parser_set_language(p, l)) {
		ts_parser_delete(p);
		return NULL;
	}
	return p;
}
*/
import "C"

import (
	"sync/atomic"
	"time"
	"unsafe"

	tspython "github.com/tree-sitter/tree-sitter-python/bindings/go"
)

// Why this file exists: go-tree-sitter makes one cgo call per cursor move and
// per node accessor, and those round trips were ~70% of Check's time. Here
// the parse is one C call, and the whole tree is copied into a Go-readable
// array (flatNode) by one more; the walker then reads only that array.

// flatNode mirrors orq_node.
type flatNode struct {
	start  uint32
	end    uint32
	parent uint32 // noParent for the root
	next   uint32 // index one past this node's subtree
	kind   uint16
	field  uint16
	flags  uint8
	_      [3]uint8
}

const noParent = ^uint32(0)

const (
	flagNamed    = C.ORQ_NAMED
	flagMissing  = C.ORQ_MISSING
	flagHasError = C.ORQ_HAS_ERROR
	flagExtra    = C.ORQ_EXTRA
)

// checkFlatLayout reports whether flatNode and orq_node agree; init panics
// otherwise, so a mismatch can never read garbage.
func checkFlatLayout() bool {
	var g flatNode
	var c C.orq_node
	return unsafe.Sizeof(g) == unsafe.Sizeof(c) &&
		unsafe.Offsetof(g.start) == unsafe.Offsetof(c.start_byte) &&
		unsafe.Offsetof(g.end) == unsafe.Offsetof(c.end_byte) &&
		unsafe.Offsetof(g.parent) == unsafe.Offsetof(c.parent) &&
		unsafe.Offsetof(g.next) == unsafe.Offsetof(c.next) &&
		unsafe.Offsetof(g.kind) == unsafe.Offsetof(c.symbol) &&
		unsafe.Offsetof(g.field) == unsafe.Offsetof(c.field) &&
		unsafe.Offsetof(g.flags) == unsafe.Offsetof(c.flags)
}

func init() {
	if !checkFlatLayout() {
		panic("validator: flatNode does not match orq_node")
	}
}

var cLanguage = (*C.TSLanguage)(tspython.Language())

// parser is a tree-sitter parser (not safe for concurrent use) with a node
// buffer that is reused from one Check to the next.
type parser struct {
	p     *C.TSParser
	nodes []flatNode
}

// maxKeptNodes bounds the node buffer (24 bytes a node) a pooled parser
// keeps between checks: enough for a typical 64 KiB body, 1.5 MB at most.
const maxKeptNodes = 1 << 16

func newParser() *parser {
	p := C.orq_parser_new(cLanguage)
	if p == nil {
		panic("validator: tree-sitter rejected the Python grammar") // compiled in; cannot happen
	}
	return &parser{p: p}
}

func (p *parser) reset() {
	C.ts_parser_reset(p.p)
	if cap(p.nodes) > maxKeptNodes {
		p.nodes = nil
	}
}

func (p *parser) close() {
	C.ts_parser_delete(p.p)
	p.p = nil
}

// cTree is a parsed tree that must be closed.
type cTree struct{ t *C.TSTree }

func (t cTree) close() { C.ts_tree_delete(t.t) }

// parse parses src in one C call. When limited, the parse gives up after
// timeout (if > 0) or once ctl.cancel() has been called (from any
// goroutine); ok is then false. Unlimited parses may pass a nil ctl.
func (p *parser) parse(src []byte, limited bool, timeout time.Duration, ctl *parseCtl) (t cTree, ok bool) {
	var ptr *C.char
	if len(src) > 0 {
		ptr = (*C.char)(unsafe.Pointer(&src[0]))
	} else {
		ptr = (*C.char)(unsafe.Pointer(&emptySrc[0]))
	}
	var c *C.orq_ctl
	if limited {
		c = &ctl.c
	}
	tree := C.orq_parse(p.p, ptr, C.uint32_t(len(src)), c, C.int64_t(timeout))
	if tree == nil {
		return cTree{}, false
	}
	if limited && ctl.c.stopped != 0 {
		C.ts_tree_delete(tree)
		return cTree{}, false
	}
	return cTree{tree}, true
}

var emptySrc = []byte{0}

// parseCtl is the parse's cancellation flag and deadline, shared with C.
type parseCtl struct{ c C.orq_ctl }

func (c *parseCtl) cancel() { atomic.StoreInt32((*int32)(unsafe.Pointer(&c.c.cancel)), 1) }

// flatten copies t's nodes into p's buffer, in pre-order, and returns them.
func (p *parser) flatten(t cTree) []flatNode {
	n := int(C.orq_node_count(t.t))
	for {
		if cap(p.nodes) < n {
			p.nodes = make([]flatNode, n)
		}
		buf := p.nodes[:cap(p.nodes)]
		got := int(C.orq_flatten(t.t, (*C.orq_node)(unsafe.Pointer(&buf[0])), C.uint32_t(len(buf))))
		if got <= len(buf) {
			return buf[:got]
		}
		n = 2 * len(buf) // cannot happen: the count above is exact
	}
}

// ancestorKinds returns the kind ids of the smallest node spanning byte off
// and of its ancestors, innermost first, at most len(buf) of them.
func (t cTree) ancestorKinds(off uint, buf []uint16) []uint16 {
	k := C.orq_ancestors(t.t, C.uint32_t(off), (*C.uint16_t)(unsafe.Pointer(&buf[0])), C.uint32_t(len(buf)))
	return buf[:k]
}

// cHeapInUse returns the bytes the C heap has handed out (glibc mallinfo2);
// the leak test uses it.
func cHeapInUse() int { return int(C.orq_heap_in_use()) }

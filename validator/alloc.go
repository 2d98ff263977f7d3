package validator

/*
#include <stdlib.h>
#include <stddef.h>

// Provided by the tree-sitter C library that go-tree-sitter compiles in.
extern void ts_set_allocator(void *(*)(size_t), void *(*)(size_t, size_t),
                             void *(*)(void *, size_t), void (*)(void *));

static void orq_use_libc_allocator(void) {
	ts_set_allocator(malloc, calloc, realloc, free);
}
*/
import "C"

// go-tree-sitter routes every allocation of the C library through Go
// callbacks (C -> Go -> C.malloc), which costs a cgo round trip per
// allocation and dominated parse time. Those callbacks end in the same libc
// malloc/calloc/realloc/free, so pointing the library straight at libc is
// compatible with memory allocated either way.
func init() {
	C.orq_use_libc_allocator()
}

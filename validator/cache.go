package validator

import (
	"container/list"
	"crypto/sha256"
	"slices"
	"sync"

	"github.com/orqest/sandbox/shared"
)

// WithCache gives the Validator a bounded LRU cache of verdicts (at most n
// entries; n <= 0 means no cache).
//
// A verdict is a pure function of the code, the import allowlist (as a
// set) and the Validator's rules table and limits, all fixed for the life
// of a Validator, so a hit is exactly what a fresh Check would return: the
// key is the SHA-256 of the code and the sorted, de-duplicated allowlist.
// Verdicts that depend on time rather than on the input are never cached:
// a Check that ran out of time (validation-timeout) or whose context ended.
// Findings are copied in and out, so no caller can change a cached verdict.
//
// Host, plugins and tier 0 each keep their own Validator (and cache): a
// hit just skips re-parsing a body already judged by this same process.
// Across processes, the host's verdict (Accept, CheckTrusting) spares a
// backend its check of a body the host accepted.
func WithCache(n int) Option {
	return func(v *Validator) {
		if n > 0 {
			v.cache = &verdictCache{max: n, items: make(map[[32]byte]*list.Element, n), order: list.New()}
		} else {
			v.cache = nil
		}
	}
}

// DefaultCacheSize is a cache size for validators that see the same tool
// bodies again and again (host, plugins).
const DefaultCacheSize = 1024

type verdictCache struct {
	mu    sync.Mutex
	max   int
	items map[[32]byte]*list.Element
	order *list.List // front: most recently used
}

type cacheEntry struct {
	key      [32]byte
	findings []shared.Finding // nil: accepted
}

func cacheKey(code string, allowed []string, f Features) [32]byte {
	imps := slices.Clone(allowed)
	slices.Sort(imps)
	imps = slices.Compact(imps)
	h := sha256.New()
	var n [8]byte
	putLen := func(l int) {
		for i := range n {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:])
	}
	// Length-prefixed, so no code/import split can collide with another.
	putLen(len(code))
	h.Write([]byte(code))
	for _, m := range imps {
		putLen(len(m))
		h.Write([]byte(m))
	}
	// The features after every import name: a length of 1<<62 no name has.
	putLen(1 << 62)
	if f.Classes {
		h.Write([]byte{1})
	} else {
		h.Write([]byte{0})
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

func (c *verdictCache) get(k [32]byte) ([]shared.Finding, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return slices.Clone(e.Value.(*cacheEntry).findings), true
}

func (c *verdictCache) put(k [32]byte, findings []shared.Finding) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&cacheEntry{key: k, findings: slices.Clone(findings)})
	for c.order.Len() > c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*cacheEntry).key)
	}
}

// cacheable reports whether a verdict depends only on the input.
func cacheable(findings []shared.Finding) bool {
	for _, f := range findings {
		if f.Rule == RuleValidationTimeout {
			return false
		}
	}
	return true
}

package main

import (
	"context"
	"crypto/sha256"
	"sort"
	"sync"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// cleanCache remembers bodies the Go validator accepted, keyed by a hash of
// the code and the (sorted) import allowlist, so that a tool called again
// and again with the same body is not re-parsed by tree-sitter each time.
// The validator is a pure function of (code, allowed imports, rules table)
// and the rules table is compiled into the binary, so a hit is exactly the
// verdict a fresh check would give. Rejections are not cached (they are
// rare and carry findings). The in-interpreter checker still runs on every
// call.
type cleanCache struct {
	mu    sync.Mutex
	max   int
	order [][32]byte
	set   map[[32]byte]struct{}
}

const cleanCacheSize = 512

func newCleanCache(max int) *cleanCache {
	return &cleanCache{max: max, set: make(map[[32]byte]struct{}, max)}
}

func cacheKey(code string, allowed []string) [32]byte {
	imps := append([]string(nil), allowed...)
	sort.Strings(imps)
	h := sha256.New()
	h.Write([]byte(code))
	for _, m := range imps {
		h.Write([]byte{0})
		h.Write([]byte(m))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// check returns the validator's findings for code, from the cache when the
// same body was accepted before.
func (c *cleanCache) check(ctx context.Context, v *validator.Validator, code string, allowed []string) []shared.Finding {
	k := cacheKey(code, allowed)
	c.mu.Lock()
	_, hit := c.set[k]
	c.mu.Unlock()
	if hit {
		return nil
	}
	findings := v.Check(ctx, code, allowed)
	if len(findings) > 0 || ctx.Err() != nil {
		return findings
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.set[k]; !ok {
		if len(c.order) >= c.max {
			delete(c.set, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, k)
		c.set[k] = struct{}{}
	}
	return nil
}

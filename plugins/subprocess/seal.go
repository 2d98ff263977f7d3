package main

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/pyrunner"
)

// sealInfo is what a probe found: the sealing layers the runner could put
// in force with this interpreter on this kernel, and what the sandbox may
// read besides the stdlib.
type sealInfo struct {
	Layers    []string
	Missing   map[string]string
	ReadPaths []string
}

// caps returns every capability really in force.
func (s *sealInfo) caps() []shared.Capability {
	caps := append([]shared.Capability(nil), baseCaps...)
	if s != nil {
		caps = append(caps, sealCaps(s.Layers)...)
	}
	return caps
}

// seal returns the runner's seal config: every layer found is required, so
// a child that cannot establish one fails closed rather than run unsealed.
func (s *sealInfo) seal(disable []string) *pyrunner.Seal {
	return &pyrunner.Seal{ReadPaths: s.ReadPaths, Require: s.Layers, Disable: disable}
}

// missingText names the layers not in force, with the reason, for the
// one WARNING Configure logs.
func (s *sealInfo) missingText() string {
	var parts []string
	for _, l := range pyrunner.Layers {
		if why, ok := s.Missing[l]; ok {
			parts = append(parts, fmt.Sprintf("%s (%s)", layerCaps[l], why))
		}
	}
	return strings.Join(parts, ", ")
}

var (
	probeMu    sync.Mutex
	probeCache = map[string]*sealInfo{}
)

// probeSeal asks the interpreter which layers it can establish here (op
// "probe": a spawned runner seals itself and reports). The result depends
// only on the interpreter and the kernel, so it is cached per process.
func (b *Backend) probeSeal(ctx context.Context, python string, disable []string) (*sealInfo, error) {
	key := python + "\x00" + strings.Join(disable, ",")
	probeMu.Lock()
	defer probeMu.Unlock()
	if s, ok := probeCache[key]; ok {
		return s, nil
	}
	cfg := Config{Python: python, Mode: ModeSpawn}
	res, err := b.runSpawn(ctx, cfg, pyrunner.Request{Op: pyrunner.OpProbe, MemoryMB: DefaultMemoryMB, Seal: &pyrunner.Seal{Disable: disable}},
		10*time.Second, DefaultMaxOutputBytes)
	if err != nil {
		return nil, fmt.Errorf("probing the sealing layers with %s: %w", python, err)
	}
	if !res.Success {
		return nil, fmt.Errorf("probing the sealing layers with %s: %s: %s (stderr: %s): %w",
			python, res.ErrorKind, res.Error, strings.TrimSpace(res.Stderr), shared.ErrUnavailable)
	}
	var pr pyrunner.ProbeResult
	if err := json.Unmarshal(res.Output, &pr); err != nil {
		return nil, fmt.Errorf("probing the sealing layers with %s: %v: %w", python, err, shared.ErrInternal)
	}
	s := &sealInfo{Layers: pr.Layers, Missing: pr.Missing, ReadPaths: libraryPaths(pr.Stdlib)}
	if s.Missing == nil {
		s.Missing = map[string]string{}
	}
	probeCache[key] = s
	return s, nil
}

// libDirs are where the dynamic loader finds the libraries extension
// modules link against.
func libDirs() []string {
	var dirs []string
	for _, g := range []string{"/lib/*-linux-gnu*", "/usr/lib/*-linux-gnu*"} {
		m, _ := filepath.Glob(g)
		dirs = append(dirs, m...)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib", "/usr/local/lib")
}

// libraryPaths returns the shared libraries (resolved, recursively) that
// the extension modules under the stdlib directories need, plus the loader
// cache: what Landlock must let the sandbox read besides the stdlib so
// that `import ssl` or `import sqlite3` works. Nothing else is readable.
func libraryPaths(stdlib []string) []string {
	dirs := libDirs()
	seen := map[string]bool{}
	var out []string
	var todo []string
	for _, d := range stdlib {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() && strings.HasSuffix(p, ".so") {
				todo = append(todo, p)
			}
			return nil
		})
	}
	resolve := func(name string) string {
		if filepath.IsAbs(name) {
			return name
		}
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
		return ""
	}
	scanned := map[string]bool{}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if scanned[p] {
			continue
		}
		scanned[p] = true
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		libs, _ := f.ImportedLibraries()
		f.Close()
		for _, l := range libs {
			r := resolve(l)
			if r == "" {
				continue
			}
			for _, q := range []string{r, evalSymlinks(r)} {
				if q != "" && !seen[q] {
					seen[q] = true
					out = append(out, q)
				}
			}
			todo = append(todo, r)
		}
	}
	// The loader cache, and the time-zone database (public data; without it
	// zoneinfo and local time fall back to UTC).
	for _, p := range []string{"/etc/ld.so.cache", "/usr/share/zoneinfo"} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func evalSymlinks(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

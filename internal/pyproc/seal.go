package pyproc

import (
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// SealInfo is what a probe found: the sealing layers the runner could put
// in force with this interpreter on this kernel, and what the sandbox may
// read besides the stdlib.
type SealInfo struct {
	Layers    []string
	Missing   map[string]string
	ReadPaths []string
	// SubIDs are what the probe mapped its user namespace to (nil when
	// the plugin is root, or has none: SubIDsMissing says why).
	SubIDs        *runner.SubIDs
	SubIDsMissing string
}

// Seal returns the runner's seal config: every layer found is required, so
// a child that cannot establish one fails closed rather than run unsealed.
// extraRead are further paths the sandbox may read (e.g. a venv's
// site-packages).
func (s *SealInfo) Seal(disable []string, extraRead ...string) *runner.Seal {
	read := s.ReadPaths
	if len(extraRead) > 0 {
		read = append(append([]string(nil), s.ReadPaths...), extraRead...)
	}
	return &runner.Seal{ReadPaths: read, Require: s.Layers, Disable: disable,
		SubIDs: s.SubIDs, SubIDsMissing: s.SubIDsMissing}
}

// SealWriting is Seal with write, the directories the sandbox may also
// write (runner.Seal.WritePaths: a session's workspace).
func (s *SealInfo) SealWriting(disable, write []string, extraRead ...string) *runner.Seal {
	seal := s.Seal(disable, extraRead...)
	seal.WritePaths = write
	return seal
}

// MissingText names the layers not in force, in the runner's order, with
// the reason; name maps a layer to the name to print (nil: the layer's).
func (s *SealInfo) MissingText(name func(layer string) string) string {
	var parts []string
	for _, l := range runner.Layers {
		if why, ok := s.Missing[l]; ok {
			n := l
			if name != nil {
				n = name(l)
			}
			parts = append(parts, fmt.Sprintf("%s (%s)", n, why))
		}
	}
	return strings.Join(parts, ", ")
}

// Probe asks the interpreter started with argv (the runner program, as for
// Spawn) which layers it can establish here: a spawned runner seals itself
// as far as it can (never the layers in disable) and reports. The result
// depends only on the interpreter and the kernel; callers cache it. dir is
// the probe's working directory ("" means a fresh temporary one).
//
// When this process is not root, the probe's user namespace maps the
// runner to a subordinate uid and gid of this account (SubordinateIDs with
// the system's files), and the seal configs built from the result do the
// same; without them the separate_uid layer is missing, with the reason.
func Probe(ctx context.Context, argv []string, disable []string, dir string, log Logger) (*SealInfo, error) {
	python := argv[0]
	seal := &runner.Seal{Disable: disable}
	if os.Geteuid() != 0 {
		sub, err := SubordinateIDs(DefaultSubIDFiles())
		if err != nil {
			seal.SubIDsMissing = err.Error()
		}
		seal.SubIDs = sub
	}
	res, err := Spawn(ctx, argv, Job{
		Request: runner.Request{Op: runner.OpProbe, Seal: seal},
		Limits:  shared.Resolved{Timeout: 10 * time.Second, MemoryMB: 128, MaxOutputBytes: 1 << 20},
		Dir:     dir,
	}, log)
	if err != nil {
		return nil, fmt.Errorf("probing the sealing layers with %s: %w", python, err)
	}
	if !res.Success {
		return nil, fmt.Errorf("probing the sealing layers with %s: %s: %s (stderr: %s): %w",
			python, res.ErrorKind, res.Error, strings.TrimSpace(res.Stderr), shared.ErrUnavailable)
	}
	var pr runner.ProbeResult
	if err := json.Unmarshal(res.Output, &pr); err != nil {
		return nil, fmt.Errorf("probing the sealing layers with %s: %v: %w", python, err, shared.ErrInternal)
	}
	s := &SealInfo{Layers: pr.Layers, Missing: pr.Missing, ReadPaths: LibraryPaths(pr.Stdlib),
		SubIDs: seal.SubIDs, SubIDsMissing: seal.SubIDsMissing}
	if s.Missing == nil {
		s.Missing = map[string]string{}
	}
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

// LibraryPaths returns the shared libraries (resolved, recursively) that
// the extension modules under the stdlib directories need, plus the loader
// cache: what Landlock must let the sandbox read besides the stdlib so
// that `import ssl` or `import sqlite3` works. Nothing else is readable.
func LibraryPaths(stdlib []string) []string {
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

// Package heldout loads the held-out corpus of validator/testdata/heldout
// (tool bodies written without looking at the checkers) for the tests of
// every tier that run it.
package heldout

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Body is one file of the corpus.
type Body struct {
	Name string // file name, e.g. "014_class_protocols.py"
	Code string
}

// Dir is the corpus directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "validator", "testdata", "heldout")
}

// Load returns the bodies of kind ("benign" or "attacks"), by name, and
// the allowlist the corpus was written for (allowed_imports.txt).
func Load(kind string) ([]Body, []string, error) {
	paths, err := filepath.Glob(filepath.Join(Dir(), kind, "*.py"))
	if err != nil {
		return nil, nil, err
	}
	if len(paths) == 0 {
		return nil, nil, os.ErrNotExist
	}
	sort.Strings(paths)
	var out []Body
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, Body{Name: filepath.Base(p), Code: string(b)})
	}
	allow, err := os.ReadFile(filepath.Join(Dir(), "allowed_imports.txt"))
	if err != nil {
		return nil, nil, err
	}
	return out, strings.Fields(string(allow)), nil
}

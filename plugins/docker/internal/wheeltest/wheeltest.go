// Package wheeltest builds tiny pure-Python wheels (PEP 427) for the tests
// of tier-2 dependencies: a zip with the package's modules and a
// <name>-<version>.dist-info with METADATA, WHEEL and RECORD (sha256
// digests). Only tests import it.
package wheeltest

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Wheel describes a wheel to build.
type Wheel struct {
	Name     string            // distribution name, e.g. "orqdemo"
	Version  string            // e.g. "1.0.0"
	Files    map[string]string // path inside site-packages -> content
	Requires []string          // Requires-Dist lines
	// Tamper, when set, is called with the member contents before they are
	// written (after RECORD was computed), to build corrupt wheels.
	Tamper func(members map[string]string)
}

// Build writes the wheel into dir (created 0755, the file 0644 so the
// container's uid 1000 can read a bind mount of dir) and returns its path.
func Build(dir string, w Wheel) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	esc := strings.NewReplacer("-", "_", ".", "_").Replace(w.Name)
	distInfo := esc + "-" + w.Version + ".dist-info"
	members := map[string]string{}
	for p, c := range w.Files {
		members[p] = c
	}
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", w.Name, w.Version)
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	members[distInfo+"/METADATA"] = meta
	members[distInfo+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: orqest-wheeltest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
	names := make([]string, 0, len(members))
	for p := range members {
		names = append(names, p)
	}
	sort.Strings(names)
	var record strings.Builder
	for _, p := range names {
		sum := sha256.Sum256([]byte(members[p]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", p, base64.RawURLEncoding.EncodeToString(sum[:]), len(members[p]))
	}
	record.WriteString(distInfo + "/RECORD,,\n")
	members[distInfo+"/RECORD"] = record.String()
	if w.Tamper != nil {
		w.Tamper(members)
	}
	path := filepath.Join(dir, esc+"-"+w.Version+"-py3-none-any.whl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	zw := zip.NewWriter(f)
	names = names[:0]
	for p := range members {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		mw, err := zw.Create(p)
		if err != nil {
			f.Close()
			return "", err
		}
		if _, err := mw.Write([]byte(members[p])); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := zw.Close(); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

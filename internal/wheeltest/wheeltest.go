// Package wheeltest builds tiny wheels (PEP 427) for the tests of tier-2
// dependencies: a zip with the package's modules and a
// <name>-<version>.dist-info with METADATA, WHEEL and RECORD (sha256
// digests); pure-Python, or native with an extension module it compiles
// (CompileExtension). Only tests import it.
package wheeltest

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
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
	// Tag is the wheel's tag, e.g. "cp311-cp311-linux_x86_64" (default
	// "py3-none-any"); any other makes Root-Is-Purelib false.
	Tag string
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
	tag, purelib := w.Tag, "false"
	if tag == "" || tag == "py3-none-any" {
		tag, purelib = "py3-none-any", "true"
	}
	members[distInfo+"/WHEEL"] = "Wheel-Version: 1.0\nGenerator: orqest-wheeltest\nRoot-Is-Purelib: " + purelib + "\nTag: " + tag + "\n"
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
	path := filepath.Join(dir, esc+"-"+w.Version+"-"+tag+".whl")
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

// Python is the interpreter CompileExtension builds for: Debian's, the
// CPython of the runtime image's base.
const Python = "/usr/bin/python3"

// Extension is a compiled extension module and the tag of a wheel that
// carries it.
type Extension struct {
	File string // the module's file name, e.g. orqnative.cpython-311-x86_64-linux-gnu.so
	Data string // its bytes
	Tag  string // e.g. cp311-cp311-linux_x86_64
}

// CompileExtension compiles the C source src of the extension module
// module with gcc against Python's headers (sysconfig) into a shared
// object. It fails when gcc, the headers or Python are missing.
func CompileExtension(dir, module, src string) (Extension, error) {
	out, err := exec.Command(Python, "-c", `import sysconfig, sys
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print("cp%d%d" % sys.version_info[:2])
print(sysconfig.get_platform().replace("-", "_").replace(".", "_"))`).Output()
	if err != nil {
		return Extension{}, fmt.Errorf("%s sysconfig: %w", Python, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 4 {
		return Extension{}, fmt.Errorf("%s sysconfig: %q", Python, out)
	}
	include, suffix, cp, plat := f[0], f[1], f[2], f[3]
	if _, err := os.Stat(filepath.Join(include, "Python.h")); err != nil {
		return Extension{}, fmt.Errorf("no Python headers (python3-dev): %w", err)
	}
	c := filepath.Join(dir, module+".c")
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		return Extension{}, err
	}
	so := filepath.Join(dir, module+suffix)
	if b, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-I"+include, "-o", so, c).CombinedOutput(); err != nil {
		return Extension{}, fmt.Errorf("gcc: %v: %s", err, b)
	}
	data, err := os.ReadFile(so)
	if err != nil {
		return Extension{}, err
	}
	return Extension{File: module + suffix, Data: string(data), Tag: cp + "-" + cp + "-" + plat}, nil
}

// AddSource is a tiny C extension module, orqnative: add(a, b) is a + b.
const AddSource = `#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a + b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, "a + b"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "orqnative", NULL, -1, methods};
PyMODINIT_FUNC PyInit_orqnative(void) { return PyModule_Create(&mod); }
`

// NativeWheel compiles AddSource (in a temporary directory under work)
// and writes the native wheel orqnative 1.0 that carries it into dir.
func NativeWheel(work, dir string) (Extension, error) {
	ext, err := CompileExtension(work, "orqnative", AddSource)
	if err != nil {
		return Extension{}, err
	}
	_, err = Build(dir, Wheel{Name: "orqnative", Version: "1.0", Tag: ext.Tag, Files: map[string]string{ext.File: ext.Data}})
	return ext, err
}

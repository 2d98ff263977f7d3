package agent

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	pep440 "github.com/aquasecurity/go-pep440-version"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// Installing dependencies from the operator's wheel directory, without pip.
//
// A wheel (PEP 427) is a zip. The runtime installs pure-Python wheels
// (platform tag "any", ABI "none", a py3/cp3 Python tag) into the agent's
// venv on /workspace, and, when the plugin gave it an exec-allowed
// directory (rtproto.Hello.NativeDir), native wheels built for the
// container's CPython and platform (a cpXY tag of its version with that
// ABI, or abi3; linux or manylinux of its architecture) into
// <NativeDir>/<agent_id>: /workspace is mounted noexec, so an extension
// module could not be mapped from there. Both directories are the
// runtime's; the children read them. Before anything is written it checks the whole
// archive: every member's path is relative and clean (no "..", no absolute
// path, no backslash), is a regular file, is listed in .dist-info/RECORD
// with a sha256/384/512 digest that matches, and the unpacked total stays
// under maxWheelBytes. Members under <name>.data/purelib|platlib go to
// site-packages; scripts, headers and data are skipped (nothing in the
// sandbox would run or find them). A file that already exists in
// site-packages (another distribution's) fails the install, and a failed
// install removes what it wrote.
//
// Requirements: each dependency is "name" or "name==version"; the newest
// compatible wheel in the directory is chosen (or the pinned version). The
// unconditional Requires-Dist lines of its METADATA are installed too, and
// each of them must also be in allowed_packages (fail closed: a package
// whose own dependency is not allowed is refused). Requires-Dist lines with
// an environment marker (extras, python_version, ...) are not installed;
// version specifiers of Requires-Dist are not checked.

// Limits of one wheel.
const (
	maxWheelBytes   = 64 << 20 // unpacked
	maxWheelMembers = 10000
	maxDepsPerCall  = 64 // distributions installed by one call, transitive ones included
)

// Tool error classes of dependency failures (the plugin maps them to shared
// errors; see toolErr in plugins/docker/session.go).
const (
	classPermissionDenied   = "permission_denied"
	classFailedPrecondition = "failed_precondition"
	// classUnavailable ("unavailable") is declared in library.go.
)

// errorClass is the tool error class of an executor error.
func errorClass(err error) string {
	switch {
	case errors.Is(err, shared.ErrPermissionDenied):
		return classPermissionDenied
	case errors.Is(err, shared.ErrFailedPrecondition):
		return classFailedPrecondition
	case errors.Is(err, shared.ErrInvalidArgument), errors.Is(err, rtproto.ErrBadID):
		return classInvalidArgument
	case errors.Is(err, shared.ErrUnavailable):
		return classUnavailable
	case errors.Is(err, shared.ErrNotFound):
		return classNotFound
	}
	return classInternal
}

// wheelFile is a parsed wheel file name.
type wheelFile struct {
	path    string
	name    string // normalised distribution name
	rawName string // as in the file name (escaped)
	version string
	native  bool // built for a platform: installed into the exec-allowed directory
}

// parseWheelName parses {name}-{version}(-{build})?-{py}-{abi}-{plat}.whl
// and reports whether it is a wheel this runtime can install: a
// pure-Python one, or, when cp names the container's CPython ("cp311"; ""
// for none: native wheels refused), a native one for it (see
// nativeCompatible).
func parseWheelName(file, cp string) (wheelFile, bool) {
	base, ok := strings.CutSuffix(filepath.Base(file), ".whl")
	if !ok {
		return wheelFile{}, false
	}
	parts := strings.Split(base, "-")
	if len(parts) != 5 && len(parts) != 6 {
		return wheelFile{}, false
	}
	py, abi, plat := parts[len(parts)-3], parts[len(parts)-2], parts[len(parts)-1]
	w := wheelFile{path: file, name: shared.NormalizePackageName(parts[0]), rawName: parts[0], version: parts[1]}
	if plat != "any" || abi != "none" {
		w.native = true
		return w, cp != "" && nativeCompatible(py, abi, plat, cp)
	}
	for _, tag := range strings.Split(py, ".") {
		if strings.HasPrefix(tag, "py3") || strings.HasPrefix(tag, "cp3") {
			return w, true
		}
	}
	return wheelFile{}, false
}

// wheelArch is the platform-tag spelling of the runtime's architecture.
func wheelArch() string {
	switch goruntime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return goruntime.GOARCH
}

// nativeCompatible reports whether a native wheel's compressed tag sets
// (PEP 425: "." separates alternatives) fit CPython cp ("cp311") on
// linux/<arch>: a platform tag linux_<arch>, manylinux1/2010/2014_<arch>
// or manylinux_2_N_<arch> (a wheel that needs a newer glibc than the
// image has fails at import, saying so); and cp with its own ABI (cp311),
// the stable ABI (abi3, from a cp3 version at most cp's), or no ABI with a
// py3 tag (a library loaded through ctypes).
func nativeCompatible(py, abi, plat, cp string) bool {
	arch := wheelArch()
	platOK := false
	for _, p := range strings.Split(plat, ".") {
		rest, ok := strings.CutSuffix(p, "_"+arch)
		switch {
		case !ok:
		case rest == "linux", rest == "manylinux1", rest == "manylinux2010", rest == "manylinux2014":
			platOK = true
		case strings.HasPrefix(rest, "manylinux_2_"):
			_, err := strconv.Atoi(strings.TrimPrefix(rest, "manylinux_2_"))
			platOK = platOK || err == nil
		}
	}
	if !platOK {
		return false
	}
	minor, _ := strconv.Atoi(strings.TrimPrefix(cp, "cp3"))
	for _, a := range strings.Split(abi, ".") {
		for _, p := range strings.Split(py, ".") {
			switch {
			case a == cp && p == cp:
				return true
			case a == "abi3" && strings.HasPrefix(p, "cp3"):
				if m, err := strconv.Atoi(strings.TrimPrefix(p, "cp3")); err == nil && m <= minor {
					return true
				}
			case a == "none" && (p == "py3" || p == cp):
				return true
			}
		}
	}
	return false
}

// pickVersion reports whether candidate should replace best (found says
// whether there is a best yet) for an unpinned requirement, in PEP 440
// order (github.com/aquasecurity/go-pep440-version: 2.0rc1 < 2.0 <
// 2.0.post1, 1.9 < 1.10): the newest final release wins, as pip picks; a
// pre-release only when the directory holds nothing else. A version PEP
// 440 cannot parse loses to every one it can.
func pickVersion(best string, found bool, candidate string) bool {
	if !found {
		return true
	}
	c, cerr := pep440.Parse(candidate)
	b, berr := pep440.Parse(best)
	switch {
	case cerr != nil:
		return false
	case berr != nil:
		return true
	case b.IsPreRelease() != c.IsPreRelease():
		return b.IsPreRelease()
	}
	return b.LessThan(c)
}

// sameVersion reports whether a wheel's version is the one a requirement
// pins, by PEP 440 equality (1.0 == 1.0.0), or as text when either does not
// parse.
func sameVersion(have, pinned string) bool {
	h, herr := pep440.Parse(have)
	p, perr := pep440.Parse(pinned)
	if herr != nil || perr != nil {
		return have == pinned
	}
	return h.Equal(p)
}

// findWheel picks the wheel of req from dir: pure-Python, or native for
// CPython cp ("" refuses native wheels).
func findWheel(dir string, req shared.Requirement, cp string) (wheelFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return wheelFile{}, fmt.Errorf("wheel directory %s: %v: %w", dir, err, shared.ErrFailedPrecondition)
	}
	var best wheelFile
	found := false
	var seen []string
	refusedNative := false
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		w, ok := parseWheelName(filepath.Join(dir, e.Name()), cp)
		if w.name != req.Name {
			continue
		}
		if !ok {
			refusedNative = refusedNative || w.native
			continue
		}
		seen = append(seen, w.version)
		if req.Version != "" && !sameVersion(w.version, req.Version) {
			continue
		}
		if pickVersion(best.version, found, w.version) {
			best, found = w, true
		}
	}
	if !found {
		what := "no pure-Python (py3-none-any) wheel"
		switch {
		case cp != "":
			what = fmt.Sprintf("no pure-Python wheel and no native one for %s on linux/%s", cp, wheelArch())
		case refusedNative:
			what = "only native wheels, and this runtime has no exec-allowed directory for them (a pure-Python wheel is needed)"
		}
		if len(seen) > 0 {
			what = fmt.Sprintf("no wheel of version %s (have %s)", req.Version, strings.Join(seen, ", "))
		}
		return wheelFile{}, fmt.Errorf("dependency %q: %s in the wheel directory: %w", req.String(), what, shared.ErrFailedPrecondition)
	}
	return best, nil
}

// install installs reqs and their unconditional requirements into env.
func (m *envManager) install(ctx context.Context, env *agentEnv, reqs []shared.Requirement) error {
	queue := append([]shared.Requirement(nil), reqs...)
	requiredBy := map[string]string{}
	count := 0
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		r := queue[0]
		queue = queue[1:]
		if have, ok := env.installed[r.Name]; ok {
			if r.Version != "" && r.Version != have {
				return fmt.Errorf("dependency %q: version %s is already installed in this agent's environment: %w", r.String(), have, shared.ErrFailedPrecondition)
			}
			continue
		}
		if count++; count > maxDepsPerCall {
			return fmt.Errorf("dependencies: more than %d distributions to install: %w", maxDepsPerCall, shared.ErrInvalidArgument)
		}
		cp := ""
		if m.nativeRoot != "" {
			cp = env.cp
		}
		w, err := findWheel(m.wheelDir, r, cp)
		if err != nil {
			if by := requiredBy[r.Name]; by != "" {
				err = fmt.Errorf("%w (required by %q)", err, by)
			}
			return err
		}
		start := time.Now()
		site := env.site
		if w.native {
			if site, err = m.nativeSite(env); err != nil {
				return err
			}
		}
		deps, err := installWheel(w, site)
		if err != nil {
			return err
		}
		env.installed[r.Name] = w.version
		m.log.Info("dependency installed", "package", r.Name, "version", w.version, "native", w.native, "site", site, "ms", time.Since(start).Milliseconds())
		for _, d := range deps {
			dr, err := shared.ParseRequirement(d)
			if err != nil {
				return fmt.Errorf("package %q requires %q, which this runtime cannot resolve: %w", r.Name, d, shared.ErrFailedPrecondition)
			}
			if _, err := shared.CheckDependencies([]string{dr.Name}, m.allowed); err != nil {
				return fmt.Errorf("package %q requires %q: %w", r.Name, dr.Name, err)
			}
			if _, done := env.installed[dr.Name]; !done {
				requiredBy[dr.Name] = r.Name
				queue = append(queue, shared.Requirement{Name: dr.Name})
			}
		}
	}
	return nil
}

// installWheel checks and unpacks the wheel w into site and returns the
// names of its unconditional Requires-Dist entries.
func installWheel(w wheelFile, site string) (requires []string, retErr error) {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("wheel %s: %s: %w", filepath.Base(w.path), fmt.Sprintf(format, a...), shared.ErrFailedPrecondition)
	}
	zr, err := zip.OpenReader(w.path)
	if err != nil {
		return nil, fail("%v", err)
	}
	defer zr.Close()
	if len(zr.File) > maxWheelMembers {
		return nil, fail("%d members, over %d", len(zr.File), maxWheelMembers)
	}

	// 1. The .dist-info directory, by the wheel's own name and version.
	distInfo, dataDir := "", ""
	byName := map[string]*zip.File{}
	var total uint64
	for _, f := range zr.File {
		name := f.Name
		if strings.HasSuffix(name, "/") {
			continue // directory entry
		}
		if !safeMember(name) {
			return nil, fail("unsafe member path %q", name)
		}
		if !f.Mode().IsRegular() {
			return nil, fail("member %q is not a regular file", name)
		}
		if _, dup := byName[name]; dup {
			return nil, fail("duplicate member %q", name)
		}
		byName[name] = f
		total += f.UncompressedSize64
		top, _, _ := strings.Cut(name, "/")
		if strings.HasSuffix(top, ".dist-info") && shared.NormalizePackageName(strings.TrimSuffix(top, ".dist-info")) == shared.NormalizePackageName(w.rawName+"-"+w.version) {
			distInfo = top
		}
		if strings.HasSuffix(top, ".data") {
			dataDir = top
		}
	}
	if total > maxWheelBytes {
		return nil, fail("unpacks to %d bytes, over %d", total, maxWheelBytes)
	}
	if distInfo == "" {
		return nil, fail("no %s-%s.dist-info directory", w.rawName, w.version)
	}

	// 2. WHEEL: version 1.x, purelib.
	wheelMeta, err := readMember(byName[distInfo+"/WHEEL"], 64<<10)
	if err != nil {
		return nil, fail("WHEEL: %v", err)
	}
	hdr := parseHeaders(wheelMeta)
	if v := first(hdr["wheel-version"]); !strings.HasPrefix(v, "1.") {
		return nil, fail("Wheel-Version %q is not 1.x", v)
	}
	if !w.native && !strings.EqualFold(first(hdr["root-is-purelib"]), "true") {
		return nil, fail("not a pure-Python wheel (Root-Is-Purelib is not true)")
	}

	// 3. RECORD: every member listed, with a matching digest.
	recordName := distInfo + "/RECORD"
	recordRaw, err := readMember(byName[recordName], 16<<20)
	if err != nil {
		return nil, fail("RECORD: %v", err)
	}
	rows, err := csv.NewReader(bytes.NewReader(recordRaw)).ReadAll()
	if err != nil {
		return nil, fail("RECORD: %v", err)
	}
	digests := map[string]string{}
	for _, row := range rows {
		if len(row) >= 2 && row[0] != "" {
			digests[row[0]] = row[1]
		}
	}
	metadata, err := readMember(byName[distInfo+"/METADATA"], 16<<20)
	if err != nil {
		return nil, fail("METADATA: %v", err)
	}

	// 4. Plan: member -> destination under site-packages, digest checked.
	type planned struct {
		f    *zip.File
		dest string
	}
	var plan []planned
	for name, f := range byName {
		if name == recordName || name == distInfo+"/RECORD.jws" || name == distInfo+"/RECORD.p7s" {
			plan = append(plan, planned{f, name})
			continue
		}
		if err := checkDigest(f, digests[name]); err != nil {
			return nil, fail("%s: %v", name, err)
		}
		rel := name
		if dataDir != "" && strings.HasPrefix(name, dataDir+"/") {
			sub := strings.TrimPrefix(name, dataDir+"/")
			kind, rest, _ := strings.Cut(sub, "/")
			if (kind != "purelib" && kind != "platlib") || rest == "" {
				continue // scripts, headers, data: nothing in the sandbox uses them
			}
			rel = rest
		}
		plan = append(plan, planned{f, rel})
	}

	// 5. Unpack; undo on failure.
	var written []string
	defer func() {
		if retErr != nil {
			for i := len(written) - 1; i >= 0; i-- {
				_ = os.Remove(written[i])
			}
		}
	}()
	for _, p := range plan {
		dest := filepath.Join(site, filepath.FromSlash(p.dest))
		if rel, err := filepath.Rel(site, dest); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fail("member %q leaves site-packages", p.dest)
		}
		if err := mkdirs(site, filepath.Dir(dest), &written); err != nil {
			return nil, fail("%v", err)
		}
		if err := extract(p.f, dest); err != nil {
			if errors.Is(err, os.ErrExist) {
				return nil, fail("%s is already installed by another distribution", p.dest)
			}
			return nil, fail("%v", err)
		}
		written = append(written, dest)
	}
	inst := filepath.Join(site, distInfo, "INSTALLER")
	if err := os.WriteFile(inst, []byte("orqest-agent-runtime\n"), 0o644); err == nil {
		written = append(written, inst)
	}
	return requiresDist(metadata), nil
}

// safeMember reports whether a zip member path is relative and clean.
func safeMember(name string) bool {
	if name == "" || strings.ContainsAny(name, "\\\x00") || strings.HasPrefix(name, "/") {
		return false
	}
	if path.Clean(name) != name {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." || part == "." || part == "" {
			return false
		}
	}
	return true
}

func readMember(f *zip.File, limit int64) ([]byte, error) {
	if f == nil {
		return nil, errors.New("missing")
	}
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("over %d bytes", limit)
	}
	return b, nil
}

// checkDigest verifies a RECORD digest ("sha256=<urlsafe b64, no padding>").
func checkDigest(f *zip.File, digest string) error {
	algo, want, ok := strings.Cut(digest, "=")
	if !ok || want == "" {
		return errors.New("not listed in RECORD with a digest")
	}
	var h hash.Hash
	switch algo {
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	case "sha512":
		h = sha512.New()
	default:
		return fmt.Errorf("RECORD digest algorithm %q is not accepted (sha256, sha384, sha512)", algo)
	}
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(h, io.LimitReader(rc, maxWheelBytes+1)); err != nil {
		return err
	}
	if got := base64.RawURLEncoding.EncodeToString(h.Sum(nil)); got != strings.TrimRight(want, "=") {
		return errors.New("digest does not match RECORD")
	}
	return nil
}

// mkdirs creates dir (under site) and records the directories it made.
func mkdirs(site, dir string, written *[]string) error {
	var missing []string
	for d := dir; d != site && len(d) > len(site); d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		*written = append(*written, missing[i])
	}
	return nil
}

func extract(f *zip.File, dest string) error {
	rc, err := f.Open()
	if err != nil {
		return err
	}
	defer rc.Close()
	out, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(rc, int64(f.UncompressedSize64)+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && uint64(n) != f.UncompressedSize64 {
		err = fmt.Errorf("%s: size does not match the archive's header", f.Name)
	}
	return err
}

// parseHeaders parses RFC 822-style "Key: value" lines (WHEEL, METADATA
// headers) up to the first blank line. Keys are lower-cased.
func parseHeaders(b []byte) map[string][]string {
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") {
			continue
		}
		k = strings.ToLower(strings.TrimSpace(k))
		out[k] = append(out[k], strings.TrimSpace(v))
	}
	return out
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

var requirementNameRE = regexp.MustCompile(`^\s*([A-Za-z0-9][A-Za-z0-9._-]*)`)

// requiresDist returns the distribution names of the unconditional
// Requires-Dist entries of METADATA (those without an environment marker).
func requiresDist(metadata []byte) []string {
	var out []string
	for _, r := range parseHeaders(metadata)["requires-dist"] {
		if strings.Contains(r, ";") {
			continue // a marker: extras, python_version, ... (not installed)
		}
		if m := requirementNameRE.FindStringSubmatch(r); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

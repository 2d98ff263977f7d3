package shared

import (
	"fmt"
	"regexp"
	"strings"
)

// Dependencies (ExecuteRequest.Dependencies) name Python distributions. The
// forms accepted are a bare name ("requests") or a pinned one
// ("requests==2.32.3"); version ranges, extras, markers, URLs and paths are
// refused, so a dependency always resolves to exactly one allow-listed
// distribution.

var (
	packageNameRE    = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,126}[A-Za-z0-9])?$`)
	packageVersionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$`)
	normalizeRunRE   = regexp.MustCompile(`[-_.]+`)
)

// NormalizePackageName returns the PEP 503 normalised form of a
// distribution name: lower case, runs of "-", "_" and "." become one "-".
// "Foo_Bar", "foo.bar" and "foo-bar" are the same package.
func NormalizePackageName(name string) string {
	return normalizeRunRE.ReplaceAllString(strings.ToLower(name), "-")
}

// Requirement is one parsed dependency.
type Requirement struct {
	Name    string // PEP 503 normalised
	Version string // empty: the newest available
}

// String renders the requirement as "name" or "name==version".
func (r Requirement) String() string {
	if r.Version == "" {
		return r.Name
	}
	return r.Name + "==" + r.Version
}

// ParseRequirement parses "name" or "name==version". Anything else is an
// error wrapping ErrInvalidArgument.
func ParseRequirement(s string) (Requirement, error) {
	name, version, pinned := strings.Cut(strings.TrimSpace(s), "==")
	name, version = strings.TrimSpace(name), strings.TrimSpace(version)
	if !packageNameRE.MatchString(name) {
		return Requirement{}, fmt.Errorf("dependency %q: want a package name, optionally pinned as name==version (no ranges, extras, URLs or paths): %w", s, ErrInvalidArgument)
	}
	if pinned && !packageVersionRE.MatchString(version) {
		return Requirement{}, fmt.Errorf("dependency %q: invalid version %q: %w", s, version, ErrInvalidArgument)
	}
	return Requirement{Name: NormalizePackageName(name), Version: version}, nil
}

// CheckDependencies parses deps and checks each against allowed (a policy's
// allowed_packages, compared after PEP 503 normalisation). A malformed
// dependency wraps ErrInvalidArgument; one outside allowed wraps
// ErrPermissionDenied and names the package. Fail closed: an empty allowed
// refuses every dependency.
func CheckDependencies(deps, allowed []string) ([]Requirement, error) {
	if len(deps) == 0 {
		return nil, nil
	}
	ok := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		ok[NormalizePackageName(strings.TrimSpace(a))] = true
	}
	out := make([]Requirement, 0, len(deps))
	seen := map[string]bool{}
	for _, d := range deps {
		r, err := ParseRequirement(d)
		if err != nil {
			return nil, err
		}
		if !ok[r.Name] {
			list := "allowed_packages is empty"
			if len(allowed) > 0 {
				list = "allowed_packages: " + strings.Join(allowed, ", ")
			}
			return nil, fmt.Errorf("dependency %q is not in the policy's allowed_packages (%s): %w", d, list, ErrPermissionDenied)
		}
		if !seen[r.String()] {
			seen[r.String()] = true
			out = append(out, r)
		}
	}
	return out, nil
}

package agent

import (
	"os"

	"github.com/orqest/sandbox/internal/pyproc"
)

// systemSiteDirs are where Debian installs Python packages of the image
// (python3-numpy, python3-pandas, ...). The interpreter runs with -S, so
// nothing there is on sys.path unless the runtime puts it there.
func systemSiteDirs() []string { return []string{"/usr/lib/python3/dist-packages"} }

// systemDataDirs are data those packages read at import time (Debian moves
// matplotlib's mpl-data to /usr/share/matplotlib and ships its rc file as
// /etc/matplotlibrc, its fonts come from fonts-dejavu); read-only, and only
// when the image has site-packages. Files and directories alike.
func systemDataDirs() []string {
	return []string{"/usr/share/matplotlib", "/usr/share/fonts", "/etc/matplotlibrc"}
}

// systemSite is the image's system site-packages: the directories a call's
// sys.path gains, and what Landlock must let its child read to import from
// them (the directories and the shared libraries their extension modules
// link against, resolved as for the stdlib). Importing from them is still
// governed by the policy: a module must be in allowed_imports (and, having
// no reviewed surface, in allow_unreviewed_imports).
type systemSite struct {
	dirs []string
	read []string
	data []string // the systemDataDirs present: read at import time
}

// systemPackages returns the image's system site-packages, or nil when
// none holds anything (the default image).
func systemPackages() *systemSite {
	var dirs []string
	for _, d := range systemSiteDirs() {
		if ents, err := os.ReadDir(d); err == nil && len(ents) > 0 {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	read := append(append([]string(nil), dirs...), pyproc.LibraryPaths(dirs)...)
	var data []string
	for _, d := range systemDataDirs() {
		if _, err := os.Stat(d); err == nil {
			read = append(read, d)
			data = append(data, d)
		}
	}
	return &systemSite{dirs: dirs, read: read, data: data}
}

// dataDirs returns the package data directories a call's imports read
// (runner.Request.ExtraReadPaths); nil without system site-packages.
func (s *systemSite) dataDirs() []string {
	if s == nil {
		return nil
	}
	return s.data
}

// paths returns a call's sys.path additions (extra, then the system
// site-packages) and what its seal must let it read besides the stdlib.
func (s *systemSite) paths(extra []string) (sysPath, read []string) {
	if s == nil {
		return extra, extra
	}
	sysPath = append(append([]string(nil), extra...), s.dirs...)
	read = append(append([]string(nil), sysPath...), s.read...)
	return sysPath, read
}

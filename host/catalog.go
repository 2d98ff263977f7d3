package host

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/orqest/sandbox/shared/plugin"
)

// ErrChecksumMismatch is wrapped by the error of a launch whose plugin binary
// does not have the sha256 its plugin block declares.
var ErrChecksumMismatch = errors.New("plugin checksum mismatch")

// PluginSource says where the catalog found a plugin binary.
type PluginSource string

// Where a plugin can come from, in the order the catalog searches.
const (
	// SourceConfigPath: an explicit `path` in the plugin's HCL block.
	SourceConfigPath PluginSource = "config"
	// SourcePluginDir: the policy's plugin_dir.
	SourcePluginDir PluginSource = "plugin_dir"
	// SourceSearchDir: a directory given with WithPluginDirs.
	SourceSearchDir PluginSource = "search_dir"
	// SourceEnvDir: a directory of the ORQEST_PLUGIN_DIR environment
	// variable.
	SourceEnvDir PluginSource = "env"
	// SourceUserDir: the user's plugin directory, UserPluginDir.
	SourceUserDir PluginSource = "user_config_dir"
	// SourceExecutableDir: the directory of the running executable.
	SourceExecutableDir PluginSource = "executable_dir"
)

// PluginEntry is one plugin binary known to the catalog.
type PluginEntry struct {
	// Name is the plugin's name: the binary name without
	// plugin.PluginPrefix, or the label of its plugin block.
	Name string `json:"name"`
	// Path is the absolute path of the binary.
	Path string `json:"path"`
	// Source says where it was found.
	Source PluginSource `json:"source"`
	// Declared is true when the policy has a plugin block for it.
	Declared bool `json:"declared"`
	// ExpectedSHA256 is the checksum the plugin block requires ("" if none).
	ExpectedSHA256 string `json:"expected_sha256,omitempty"`
	// SHA256 is the checksum of the binary, filled by Catalog.List.
	SHA256 string `json:"sha256,omitempty"`

	decl *PluginConfig
}

// PluginDirEnv names the environment variable whose directories (a list
// separated by os.PathListSeparator) the catalog searches after the
// policy's plugin_dir and WithPluginDirs: how a program embedding the host
// (whose executable is not beside the plugins, e.g. under `go run`) points
// at installed plugins without a policy change.
const PluginDirEnv = "ORQEST_PLUGIN_DIR"

// UserPluginDir returns the per-user plugin directory the catalog searches
// after PluginDirEnv: <os.UserConfigDir()>/orqest-sandbox/plugins
// (~/.config/orqest-sandbox/plugins on Linux), or "" when the user has no
// config directory.
func UserPluginDir() string {
	d, err := os.UserConfigDir()
	if err != nil || d == "" {
		return ""
	}
	return filepath.Join(d, "orqest-sandbox", "plugins")
}

// Catalog is the set of plugins a host can launch: the plugin blocks of the
// policy plus every executable named plugin.PluginPrefix+<name> in the
// search directories, in this order: the policy's plugin_dir,
// WithPluginDirs, $ORQEST_PLUGIN_DIR, UserPluginDir, the executable's
// directory. The first binary found for a name wins; an explicit path in a
// plugin block wins over all of them.
type Catalog struct {
	dirs    []searchDir
	entries map[string]*PluginEntry

	mu   sync.Mutex
	sums map[string]string // path -> sha256
}

type searchDir struct {
	path   string
	source PluginSource
}

// NewCatalog discovers plugins for cfg. extraDirs are searched after
// plugin_dir and before $ORQEST_PLUGIN_DIR, the user's plugin directory and
// the executable's directory. The diagnostics report
// declared plugins that cannot be found, explicit paths that do not exist
// and binaries whose sha256 does not match; references from sandboxes are
// checked by Load.
func NewCatalog(cfg *Config, extraDirs []string) (*Catalog, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	c := &Catalog{entries: map[string]*PluginEntry{}, sums: map[string]string{}}

	if cfg.PluginDir != "" {
		dir := cfg.resolvePath(cfg.PluginDir)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			diags = append(diags, errDiag(cfg.PluginDirRange, "Plugin directory not found",
				fmt.Sprintf("plugin_dir %q (resolved to %s) is not a directory. Relative paths are relative to the policy file's directory.", cfg.PluginDir, dir)))
		} else {
			c.dirs = append(c.dirs, searchDir{dir, SourcePluginDir})
		}
	}
	for _, d := range extraDirs {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		c.dirs = append(c.dirs, searchDir{d, SourceSearchDir})
	}
	for _, d := range filepath.SplitList(os.Getenv(PluginDirEnv)) {
		if d == "" {
			continue
		}
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		c.dirs = append(c.dirs, searchDir{d, SourceEnvDir})
	}
	if d := UserPluginDir(); d != "" {
		c.dirs = append(c.dirs, searchDir{d, SourceUserDir})
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		c.dirs = append(c.dirs, searchDir{filepath.Dir(exe), SourceExecutableDir})
	}

	for _, d := range c.dirs {
		ents, err := os.ReadDir(d.path)
		if err != nil {
			continue
		}
		for _, e := range ents {
			name, ok := strings.CutPrefix(e.Name(), plugin.PluginPrefix)
			if !ok || !pluginNameRe.MatchString(name) {
				continue
			}
			if _, seen := c.entries[name]; seen {
				continue
			}
			p := filepath.Join(d.path, e.Name())
			if !isExecutableFile(p) {
				continue
			}
			c.entries[name] = &PluginEntry{Name: name, Path: p, Source: d.source}
		}
	}

	for _, pc := range cfg.Plugins {
		if pc.Path != "" {
			p := cfg.resolvePath(pc.Path)
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			if !isExecutableFile(p) {
				diags = append(diags, errDiag(pc.PathRange, "Plugin binary not found",
					fmt.Sprintf("Plugin %q: %s is not an executable file. Relative paths are relative to the policy file's directory.", pc.Name, p)))
				continue
			}
			c.entries[pc.Name] = &PluginEntry{Name: pc.Name, Path: p, Source: SourceConfigPath}
		}
		e, ok := c.entries[pc.Name]
		if !ok {
			diags = append(diags, errDiag(pc.DefRange, "Plugin not found",
				fmt.Sprintf("No executable named %s%s in %s.", plugin.PluginPrefix, pc.Name, c.searchedList())))
			continue
		}
		e.Declared = true
		e.decl = pc
		if pc.SHA256 != "" && validSHA256(pc.SHA256) {
			e.ExpectedSHA256 = normalizeSHA256(pc.SHA256)
			got, err := c.sum(e.Path)
			switch {
			case err != nil:
				diags = append(diags, errDiag(pc.SHA256Range, "Cannot verify plugin checksum", err.Error()))
			case got != e.ExpectedSHA256:
				diags = append(diags, errDiag(pc.SHA256Range, "Plugin checksum mismatch",
					fmt.Sprintf("Plugin %q at %s has sha256 %s, but the policy requires %s. The binary was not launched.", pc.Name, e.Path, got, e.ExpectedSHA256)))
			}
		}
	}
	return c, diags
}

// searchedList names the directories searched and how to add one, for a
// plugin that was not found.
func (c *Catalog) searchedList() string {
	var ds []string
	for _, d := range c.dirs {
		ds = append(ds, d.path+" ("+string(d.source)+")")
	}
	searched := "no search directory"
	if len(ds) > 0 {
		searched = strings.Join(ds, ", ")
	}
	return searched + "; install the plugin into one of them, set " + PluginDirEnv + " to its directory, or set plugin_dir in the policy"
}

// SearchDirs returns the directories searched, in order.
func (c *Catalog) SearchDirs() []string {
	var out []string
	for _, d := range c.dirs {
		out = append(out, d.path)
	}
	return out
}

// Lookup returns the plugin called name.
func (c *Catalog) Lookup(name string) (PluginEntry, bool) {
	e, ok := c.entries[name]
	if !ok {
		return PluginEntry{}, false
	}
	return *e, true
}

// List returns every plugin, sorted by name, with its binary's sha256.
func (c *Catalog) List() []PluginEntry {
	var out []PluginEntry
	for _, e := range c.entries {
		x := *e
		if sum, err := c.sum(e.Path); err == nil {
			x.SHA256 = sum
		}
		out = append(out, x)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (c *Catalog) sum(path string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sums[path]; ok {
		return s, nil
	}
	s, err := FileSHA256(path)
	if err == nil {
		c.sums[path] = s
	}
	return s, err
}

// FileSHA256 returns the hex sha256 of the file at path.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func isExecutableFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

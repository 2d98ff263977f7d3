package host

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// dangerousImports maps modules that hand user code the host (processes,
// files, the interpreter's internals, the network) to why they are
// dangerous. A policy that allows one of them gets a lint warning.
var dangerousImports = map[string]string{
	"os":              "process, file and environment access (os.system, os.environ)",
	"sys":             "interpreter internals (sys.modules, sys._getframe)",
	"subprocess":      "runs arbitrary programs",
	"importlib":       "imports any module, bypassing allowed_imports",
	"ctypes":          "arbitrary memory access and native calls",
	"builtins":        "reaches eval, exec, open and __import__",
	"shutil":          "file system manipulation",
	"pathlib":         "file system access",
	"io":              "file access (io.open)",
	"socket":          "network access",
	"pickle":          "arbitrary code execution on load",
	"marshal":         "loads code objects",
	"inspect":         "frame and code-object introspection",
	"gc":              "reaches every live object (gc.get_objects)",
	"types":           "builds functions and code objects",
	"code":            "an interactive interpreter",
	"codeop":          "compiles code",
	"multiprocessing": "spawns processes",
	"threading":       "spawns threads that outlive timeouts",
	"signal":          "changes signal handling (defeats timeouts)",
	"posix":           "os without the wrapper",
	"pty":             "spawns shells",
	"runpy":           "runs modules and files",
	"urllib":          "network access",
	"http":            "network access",
	"ftplib":          "network access",
	"smtplib":         "network access",
	"asyncio":         "subprocesses and sockets",
	"tempfile":        "file system access",
	"glob":            "file system access",
	"resource":        "raises its own resource limits",
	"sysconfig":       "interpreter internals",
	"_thread":         "spawns threads",
	"__main__":        "the runner's namespace",
}

// PolicyWarnings lints a policy and returns warnings (never errors) with
// source ranges: dangerous modules in allowed_imports, and sandboxes that
// opt out of isolation with unsafe = true.
func PolicyWarnings(cfg *Config) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, p := range cfg.Policies {
		var bad []string
		for _, m := range p.AllowedImports {
			top, _, _ := strings.Cut(m, ".")
			if why, ok := dangerousImports[top]; ok {
				bad = append(bad, fmt.Sprintf("%s (%s)", m, why))
			}
		}
		if len(bad) == 0 {
			continue
		}
		sort.Strings(bad)
		r := p.AllowedImportsRange
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Dangerous module in allowed_imports",
			Detail: fmt.Sprintf("Policy %q lets user code import %s. Code that can import these can escape the sandbox's static checks; allow them only for trusted code.",
				p.Name, strings.Join(bad, ", ")),
			Subject: &r,
		})
	}
	for _, s := range cfg.Sandboxes {
		if s.Unsafe {
			r := s.DefRange
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Sandbox without isolation",
				Detail:   fmt.Sprintf("Sandbox %q sets unsafe = true: a tier-0 backend runs code in its own process with no isolation. Use it for tests and trusted code only.", s.Name),
				Subject:  &r,
			})
		}
	}
	return diags
}

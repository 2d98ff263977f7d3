package rtproto

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/orqest/sandbox/shared/toollib"
)

// The tier-2 runtime's side of the per-user tool library (its types are
// the contract in shared/toollib): where the library lives, how events
// reach the plugin, the names a library tool may take and the MCP input
// schemas of the library tools.

// LibraryPath is where the library lives in the container: the user's
// volume is mounted at /data.
const LibraryPath = "/data/orqest-tools.sqlite"

// MetaEvents is the `_meta` key of a tool result that carries the events
// the call produced ([]Event), for the host's bus.
const MetaEvents = "orqest/events"

// MetaPolicy is the `_meta` key of a promoted tool's call that carries the
// policy in force (ToolPolicy), set by the plugin from the host's request.
const MetaPolicy = "orqest/policy"

// ToolPolicy is the policy in force for a promoted tool's call: the
// runtime refuses the call, not run, when the tool was promoted with an
// import AllowedImports does not list, and runs it with these limits.
type ToolPolicy struct {
	AllowedImports []string `json:"allowed_imports"`
	TimeoutS       float64  `json:"timeout_s,omitempty"`
	MemoryMB       int      `json:"memory_mb,omitempty"`
	MaxOutputBytes int      `json:"max_output_bytes,omitempty"`
}

// Disallowed returns the imports of a promoted tool the policy does not
// list (a listed package covers its submodules).
func (p ToolPolicy) Disallowed(imports []string) []string {
	var bad []string
	for _, m := range imports {
		ok := false
		for _, a := range p.AllowedImports {
			if m == a || strings.HasPrefix(m, a+".") {
				ok = true
				break
			}
		}
		if !ok {
			bad = append(bad, m)
		}
	}
	return bad
}

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]{0,63}$`)

// ReservedToolNames cannot name a library tool: they are the runtime's own
// tools, served on the same MCP server, where a promoted tool of the same
// name would replace them.
var ReservedToolNames = []string{
	ToolExecute, ToolInfo,
	ToolPutFile, ToolGetFile, ToolListFiles, ToolSaveState, ToolRestoreState,
	toollib.ToolListTools, toollib.ToolPromote, toollib.ToolForget,
}

// CheckToolName checks a library tool name: ^[a-zA-Z][a-zA-Z0-9_]{0,63}$
// and not one of the runtime's own tools.
func CheckToolName(name string) error {
	if !toolNamePattern.MatchString(name) {
		return fmt.Errorf("tool_name %q: must match %s", name, toolNamePattern)
	}
	if slices.Contains(ReservedToolNames, name) {
		return fmt.Errorf("tool_name %q is reserved by the runtime", name)
	}
	return nil
}

// ToolSchema is the input schema of a promoted tool: its args object.
var ToolSchema = map[string]any{"type": "object"}

// ListSchema, PromoteSchema and ForgetSchema are the input schemas of the
// library tools.
var (
	ListSchema = map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"include_code": map[string]any{"type": "boolean"}},
		"additionalProperties": false,
	}
	PromoteSchema = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":      map[string]any{"type": "string"},
			"code_hash": map[string]any{"type": "string"},
			"by":        map[string]any{"type": "string"},
		},
		"required":             []string{"name"},
		"additionalProperties": false,
	}
	ForgetSchema = map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name":      map[string]any{"type": "string"},
			"code_hash": map[string]any{"type": "string"},
		},
		"required":             []string{"name"},
		"additionalProperties": false,
	}
)

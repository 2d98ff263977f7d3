package rtproto

import (
	"fmt"
	"regexp"
	"slices"

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

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]{0,63}$`)

// ReservedToolNames cannot name a library tool.
var ReservedToolNames = []string{ToolExecute, ToolInfo, toollib.ToolListTools, toollib.ToolPromote, toollib.ToolForget}

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

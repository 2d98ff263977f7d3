package rtproto

import "encoding/json"

// The runtime's tools that save its stateful interpreters' globals and put
// them back, for a pause that keeps no memory (tier 2): the globals that
// are plain data, in the runner's own typed encoding (runner.OpSaveGlobals),
// never pickle. Agent scope: what they carry is the session's own data.
const (
	ToolSaveState    = "save_state"
	ToolRestoreState = "restore_state"
)

// MaxSavedStateBytes bounds the saved globals of one session, every
// agent's together, as encoded: they travel back to the runtime in one MCP
// frame, which it reads up to 16 MB.
const MaxSavedStateBytes = 12 << 20

// SavedState is what save_state returns and restore_state takes back.
type SavedState struct {
	// Agents holds, per agent id, its interpreter's saved globals: an
	// object of name → node of the runner's encoding.
	Agents map[string]json.RawMessage `json:"agents"`
	// Kept and NotKept name the globals saved and those that are not
	// plain data (a function, a module, an open file), "agent/name",
	// sorted. Only save_state fills them.
	Kept    []string `json:"kept,omitempty"`
	NotKept []string `json:"not_kept,omitempty"`
}

// RestoreStateResult is restore_state's result: the globals loaded into
// an interpreter now (Kept) or refused by it (NotKept), "agent/name", and
// the agents without an interpreter yet (Pending), whose globals are
// loaded when their first stateful call starts one.
type RestoreStateResult struct {
	Kept    []string `json:"kept,omitempty"`
	NotKept []string `json:"not_kept,omitempty"`
	Pending []string `json:"pending,omitempty"`
}

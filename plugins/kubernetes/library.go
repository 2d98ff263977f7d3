package kubernetes

// The plugin side of the per-user tool library and the session's other
// tools, as in tier 2: the promotion policy goes to the runtime in the
// hello line, the library's events come back with each result, and
// SessionTools (mint a token, call the runtime's tools with it) and
// FileStore (the session's workspace through the runtime's file tools)
// come from the embedded session.Manager.

import (
	"fmt"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

var (
	_ shared.SessionTools = (*Backend)(nil)
	_ shared.FileStore    = (*Backend)(nil)
	_ shared.Streamer     = (*Backend)(nil)
)

// normalizePromotion fills the policy's defaults and checks it.
func (c *Config) normalizePromotion() error {
	p, err := toollib.NormalizeBlock(c.Promotion)
	if err != nil {
		return fmt.Errorf("kubernetes config: %w", err)
	}
	c.Promotion = p
	return nil
}

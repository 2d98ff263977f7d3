package docker

// The plugin side of the per-user tool library: the promotion
// policy (the `promotion {}` block of the plugin's config schema, in the
// config JSON as "promotion") goes to the runtime in the hello line; the
// library's events come back in each tool result's _meta and are handed to
// the host in ExecuteResponse.Events / CallToolResponse.Events; and
// SessionTools lets the host mint a token (MintToken) and call the session's other tools with it.

import (
	"fmt"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

var (
	_ shared.SessionTools        = (*Backend)(nil)
	_ shared.SessionToolStreamer = (*Backend)(nil)
)

// DefaultOperatorTokenTTL is the lifetime of a token minted without a TTL.
const DefaultOperatorTokenTTL = rtclient.DefaultOperatorTokenTTL

// normalizePromotion fills the policy's defaults and checks it.
func (c *Config) normalizePromotion() error {
	p, err := toollib.NormalizeBlock(c.Promotion)
	if err != nil {
		return fmt.Errorf("docker config: %w", err)
	}
	c.Promotion = p
	return nil
}

// withPromotion adds the tool library's policy to the hello line.
func withPromotion(cfg Config, h rtproto.Hello) rtproto.Hello {
	h.Promotion = cfg.Promotion
	return h
}

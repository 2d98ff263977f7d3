package docker

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/shared"
)

// TestEgressConfigRefusals: a network block with network = "bridge" (a
// route around the proxy) or a remote engine (no socket to bind-mount) is
// refused at the attribute; a malformed entry is refused too.
func TestEgressConfigRefusals(t *testing.T) {
	pol := &shared.EgressPolicy{Name: "n", Allow: []string{"a.example"}}
	for _, tc := range []struct {
		cfg   map[string]any
		pol   *shared.EgressPolicy
		field string
	}{
		{map[string]any{"network": "bridge"}, pol, "network"},
		{map[string]any{"endpoint": "tcp://127.0.0.1:2375"}, pol, "endpoint"},
		{map[string]any{"runtime": "runsc"}, pol, "runtime"},
		{map[string]any{}, &shared.EgressPolicy{Name: "n", Allow: []string{"*"}}, ""},
	} {
		cfg := defaultConfig()
		raw, _ := json.Marshal(tc.cfg)
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.Network == "" {
			cfg.Network = NetworkNone
		}
		err := configureEgress(&cfg, tc.pol)
		var fe *shared.FieldError
		switch {
		case err == nil:
			t.Errorf("%v: accepted", tc.cfg)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%v: %v, want a refusal of %s", tc.cfg, err, tc.field)
		case tc.field == "" && !errors.Is(err, egress.ErrInvalidRule):
			t.Errorf("%v: %v, want ErrInvalidRule", tc.cfg, err)
		}
	}
}

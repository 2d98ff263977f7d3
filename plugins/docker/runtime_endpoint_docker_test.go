package docker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/shared"
)

func configureWith(t *testing.T, extra map[string]any) (*Backend, error) {
	t.Helper()
	b := NewBackend(hclog.New(&hclog.LoggerOptions{Name: "docker-rt-test", Level: hclog.Warn, Output: os.Stderr}))
	cfg := map[string]any{"image": testImage()}
	for k, v := range extra {
		cfg[k] = v
	}
	raw, _ := json.Marshal(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := b.Configure(ctx, shared.ConfigureRequest{Config: raw})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b, err
}

// config runtime passes docker run --runtime; one the engine does not know
// is refused at Configure, naming the field and the runtimes it has.
func TestRuntimeOption(t *testing.T) {
	dc := requireDocker(t)
	_, err := configureWith(t, map[string]any{"runtime": "no-such-runtime"})
	var fe *shared.FieldError
	if !errors.As(err, &fe) || fe.Field != "runtime" || !errors.Is(err, shared.ErrInvalidArgument) || !strings.Contains(err.Error(), "runc") {
		t.Fatalf("unknown runtime: %v", err)
	}
	b, err := configureWith(t, map[string]any{"runtime": "runc"})
	if err != nil {
		t.Fatal(err)
	}
	user := testUser(t)
	sid := openSession(t, b, user)
	ids := containersOf(t, dc, LabelUser+"="+user)
	if len(ids) != 1 {
		t.Fatalf("containers of the session: %v", ids)
	}
	ins, err := dc.ContainerInspect(context.Background(), ids[0], client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ins.Container.HostConfig.Runtime != "runc" {
		t.Errorf("the session container's runtime is %q, want runc", ins.Container.HostConfig.Runtime)
	}
	if r := execOK(t, b, shared.ExecuteRequest{Code: "return 7", SessionID: sid}); string(r.Output) != "7" {
		t.Errorf("execute: %s", r.Output)
	}
	if _, err := b.Close(context.Background(), shared.CloseRequest{SessionID: sid}); err != nil {
		t.Error(err)
	}
}

// config endpoint names the engine: a socket that answers works, one that
// does not is ErrUnavailable naming it.
func TestEndpointOption(t *testing.T) {
	requireDocker(t)
	if _, err := configureWith(t, map[string]any{"endpoint": "unix:///var/run/docker.sock"}); err != nil {
		t.Fatalf("the local socket as an endpoint: %v", err)
	}
	_, err := configureWith(t, map[string]any{"endpoint": "unix:///nonexistent/docker.sock"})
	if !errors.Is(err, shared.ErrUnavailable) || !strings.Contains(err.Error(), "unix:///nonexistent/docker.sock") {
		t.Fatalf("a dead endpoint: %v", err)
	}
}

package docker

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// dataScienceImage is the data-science variant `make image-datascience`
// builds (ORQEST_DOCKER_IMAGE_DS overrides it).
func dataScienceImage() string {
	if v := os.Getenv("ORQEST_DOCKER_IMAGE_DS"); v != "" {
		return v
	}
	return DefaultImage() + "-datascience"
}

// pandas and numpy from the data-science image, imported by code the
// policy allows them to, under the same seal as every tier-2 child
// (Landlock reads the packages and their libraries; the seccomp allowlist
// holds): a groupby over args and a numpy reduction.
func TestDataScienceImage(t *testing.T) {
	dc := requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := dc.ImageInspect(ctx, dataScienceImage()); err != nil {
		if os.Getenv("ORQEST_REQUIRE_DOCKER") == "1" {
			t.Fatalf("ORQEST_REQUIRE_DOCKER=1 and the data-science image %s is missing (make image-datascience): %v", dataScienceImage(), err)
		}
		t.Skipf("SKIPPING: the data-science image %s is missing (make image-datascience): %v", dataScienceImage(), err)
	}
	user := testUser(t)
	b := NewBackend(hclog.New(&hclog.LoggerOptions{Name: "docker-ds-test", Level: hclog.Warn, Output: os.Stderr}))
	cfg, _ := json.Marshal(map[string]any{"image": dataScienceImage()})
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: cfg}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	sid := openSession(t, b, user)
	run := func(code string, allowed ...string) shared.ExecutionResult {
		t.Helper()
		r, err := b.Execute(ctx, shared.ExecuteRequest{Code: code, AllowedImports: allowed, SessionID: sid, MemoryMB: 512, Timeout: 60 * time.Second,
			Args: []byte(`{"rows": [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r.Result
	}
	r := run("import pandas as pd\ndf = pd.DataFrame(args['rows'])\nreturn df.groupby('k')['v'].sum().to_dict()", "pandas")
	if !r.Success || string(r.Output) != `{"a":4,"b":2}` {
		t.Fatalf("pandas groupby: %s %s %s", r.ErrorKind, r.Error, r.Output)
	}
	r = run("import numpy as np\nreturn float(np.array([v['v'] for v in args['rows']]).mean())", "numpy")
	if !r.Success || string(r.Output) != "2.0" {
		t.Fatalf("numpy: %s %s %s", r.ErrorKind, r.Error, r.Output)
	}
	// The policy still decides: without pandas in the allowlist, no import.
	if r = run("import pandas\nreturn 1"); r.Success || r.ErrorKind != shared.KindValidation {
		t.Errorf("pandas without the allowlist: %s %s", r.ErrorKind, r.Error)
	}
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Error(err)
	}
}

package pyproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// A child SIGKILLed from outside while its code runs is reported as
// killed, from outside: not as a memory kill (it has a memory limit, and no
// trace of running out of it), in both modes.
func TestOutsideKillIsKilled(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	rules := json.RawMessage(validator.RulesJSON())
	s, err := pyproc.Probe(ctx, runner.Argv(python), nil, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := pyproc.StartForkServer(runner.ForkServerArgv(python), runner.ForkServerConfig{Seal: s.Seal(nil), Rules: rules}, pyproc.ForkServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	run := map[string]func(pyproc.Job) (shared.ExecutionResult, error){
		"spawn": func(j pyproc.Job) (shared.ExecutionResult, error) {
			j.Request.Seal = s.Seal(nil)
			return pyproc.Spawn(ctx, runner.Argv(python), j, nil)
		},
		"fork": func(j pyproc.Job) (shared.ExecutionResult, error) { return fs.Run(ctx, j) },
	}
	for mode, fn := range run {
		// The code says it runs (its first line, streamed); it is killed then.
		var mu sync.Mutex
		pid := 0
		var once sync.Once
		job := pyproc.Job{
			Request: runner.Request{Code: "print('running', flush=True)\nwhile True:\n    pass", Rules: rules},
			Limits:  shared.Resolved{Timeout: 30 * time.Second, MemoryMB: 128, MaxOutputBytes: 1 << 16},
			OnStart: func(p int, _ string) {
				mu.Lock()
				pid = p
				mu.Unlock()
			},
			OnOutput: func(stream string, _ []byte) {
				if stream != shared.StreamStdout {
					return
				}
				once.Do(func() {
					mu.Lock()
					p := pid
					mu.Unlock()
					_ = syscall.Kill(p, syscall.SIGKILL)
				})
			},
		}
		res, err := fn(job)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if res.ErrorKind != shared.KindKilled || !strings.Contains(res.Error, "killed by SIGKILL from outside the sandbox") {
			t.Errorf("%s: %s %q, want %s from outside", mode, res.ErrorKind, res.Error, shared.KindKilled)
		}
	}
}

// A child that exhausts its cgroup's memory (a container's limit, far
// below its own RLIMIT_AS) is OOM-killed by the kernel with SIGKILL, and
// that is a memory kill: the cgroup counted it. The test runs itself
// (TestOOMHelper) in a container of the runtime image with 64 MB; it skips
// without docker or the image.
func TestCgroupOOMKillIsMemory(t *testing.T) {
	image := os.Getenv("ORQEST_DOCKER_IMAGE")
	if image == "" {
		image = "orqest/agent-runtime:0.1.0"
	}
	if out, err := exec.Command("docker", "image", "inspect", image).CombinedOutput(); err != nil {
		t.Skipf("SKIPPING: docker or the image %s is unavailable: %v %s", image, err, out)
	}
	dir := t.TempDir()
	// The image is the same Debian as the machines that build: the test
	// binary (cgo: the validator's parser) runs in it as it is.
	build := exec.Command("go", "test", "-c", "-o", filepath.Join(dir, "pyproc.test"), ".")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test binary: %v\n%s", err, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "run", "--rm", "--memory", "64m", "--memory-swap", "64m",
		"-e", "ORQEST_OOM_HELPER=1", "-v", dir+":/t:ro", "--entrypoint", "/t/pyproc.test", image,
		"-test.run", "^TestOOMHelper$", "-test.v")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("docker run: %v\n%s", err, out)
	}
	var res shared.ExecutionResult
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			found = json.Unmarshal([]byte(rest), &res) == nil
		}
	}
	if !found {
		t.Fatalf("no result from the helper:\n%s", out)
	}
	t.Logf("in 64 MB: %s: %s", res.ErrorKind, res.Error)
	if res.ErrorKind != shared.KindMemory || !strings.Contains(res.Error, "OOM kill") {
		t.Errorf("result %+v, want a memory kill naming the OOM kill", res)
	}
}

// TestOOMHelper is TestCgroupOOMKillIsMemory's inside, in the container:
// a spawned interpreter with a 1 GB RLIMIT_AS fills 300 MB.
func TestOOMHelper(t *testing.T) {
	if os.Getenv("ORQEST_OOM_HELPER") != "1" {
		t.Skip("runs inside TestCgroupOOMKillIsMemory's container")
	}
	job := pyproc.Job{
		Request: runner.Request{Code: "x = b'a' * (300 * 1024 * 1024)\nreturn len(x)", Rules: json.RawMessage(validator.RulesJSON())},
		Limits:  shared.Resolved{Timeout: 60 * time.Second, MemoryMB: 1024, MaxOutputBytes: 1 << 16},
	}
	res, err := pyproc.Spawn(context.Background(), runner.Argv(python), job, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", b)
}

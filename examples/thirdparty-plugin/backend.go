package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/validator"
)

// Name and Version identify the backend in Info.
const (
	Name    = "pyexec"
	Version = "0.1.0"
)

// Defaults of the config block. A request's limits are resolved by
// shared.Prepare: what it leaves at zero gets the contract's defaults.
const (
	DefaultPython      = "/usr/bin/python3"
	DefaultMaxParallel = 8
)

// Config is the backend's `config {}` block, advertised in Info's
// ConfigSchema so that the host checks it before launch.
type Config struct {
	// Python is the interpreter binary (an absolute path).
	Python string `json:"python"`
	// MaxParallel bounds how many executions run at once.
	MaxParallel int `json:"max_parallel"`
}

// Backend is the pyexec sandbox. It is safe for concurrent use.
type Backend struct {
	shared.NoSessions // no sessions: Open and Close return ErrNotSupported

	logger    hclog.Logger
	validator *validator.Validator

	mu  sync.RWMutex
	cfg Config
	sem chan struct{}
}

var _ shared.Sandbox = (*Backend)(nil)

// NewBackend returns a backend with the default configuration.
func NewBackend(logger hclog.Logger) *Backend {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Backend{
		logger:    logger,
		validator: validator.New(),
		cfg:       Config{Python: DefaultPython, MaxParallel: DefaultMaxParallel},
		sem:       make(chan struct{}, DefaultMaxParallel),
	}
}

// Info describes the backend and the capabilities it enforces.
func (b *Backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	return shared.InfoResponse{
		Name:        Name,
		Tier:        3,
		Version:     Version,
		APIVersions: []int{shared.APIVersion},
		Capabilities: []shared.Capability{
			shared.CapMemoryLimit,
			shared.CapCPULimit,
			shared.CapWallClockTimeout,
			shared.CapFreshProcess,
			shared.CapOutputLimit,
		},
		ConfigSchema: []shared.ConfigAttribute{
			{Name: "python", Type: "string", Description: "absolute path of the Python interpreter (default " + DefaultPython + ")"},
			{Name: "max_parallel", Type: "number", Description: fmt.Sprintf("executions run at once (default %d)", DefaultMaxParallel)},
		},
		Description: "Example third-party backend: one python3 process per execution with RLIMIT_AS, RLIMIT_CPU " +
			"and a wall clock. Demonstrates the plugin SDK; it adds no isolation beyond process limits.",
	}, nil
}

// Configure decodes the `config {}` block (as JSON) and checks the
// interpreter. Unsafe is irrelevant: this backend never runs code in its own
// process.
func (b *Backend) Configure(_ context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	cfg := Config{Python: DefaultPython, MaxParallel: DefaultMaxParallel}
	// A refusal that names its attribute (shared.ConfigError, which
	// DecodeConfig uses too) is reported at that attribute in the policy.
	if err := shared.DecodeConfig("pyexec", req.Config, &cfg); err != nil {
		return shared.ConfigureResponse{}, err
	}
	if cfg.Python == "" {
		cfg.Python = DefaultPython
	}
	if cfg.MaxParallel == 0 {
		cfg.MaxParallel = DefaultMaxParallel
	}
	if !filepath.IsAbs(cfg.Python) {
		return shared.ConfigureResponse{}, shared.ConfigError("pyexec", "python", nil, "%q is not an absolute path", cfg.Python)
	}
	if cfg.MaxParallel < 1 {
		return shared.ConfigureResponse{}, shared.ConfigError("pyexec", "max_parallel", nil, "%d must be at least 1", cfg.MaxParallel)
	}
	if st, err := os.Stat(cfg.Python); err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return shared.ConfigureResponse{}, shared.ConfigError("pyexec", "python", shared.ErrUnavailable, "%q is not an executable file", cfg.Python)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cfg.MaxParallel != b.cfg.MaxParallel {
		b.sem = make(chan struct{}, cfg.MaxParallel)
	}
	b.cfg = cfg
	return shared.ConfigureResponse{}, nil
}

// Validate runs the project's static checks (package validator); nothing runs.
func (b *Backend) Validate(ctx context.Context, req shared.ValidateRequest) (shared.ValidateResponse, error) {
	if err := shared.CheckCodeSize(req.Code, shared.DefaultMaxCodeBytes); err != nil {
		return shared.ValidateResponse{}, err
	}
	return shared.ValidateResponse{Findings: b.validator.Check(ctx, req.Code, req.AllowedImports)}, nil
}

// Execute validates the code, then runs it in a fresh interpreter. Failures
// of the user's code are reported in the result; a Go error means the
// request was malformed, the caller cancelled, or the backend broke.
func (b *Backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	start := time.Now()
	if req.SessionID != "" {
		return shared.ExecuteResponse{}, fmt.Errorf("session %q: pyexec has no sessions: %w", req.SessionID, shared.ErrNotSupported)
	}
	// The request's limits, resolved once: the contract's defaults for
	// what it leaves at zero (the host sends every one set), the code and
	// args caps, and args checked to be a JSON object.
	p, err := shared.Prepare(req, shared.Defaults{})
	if err != nil {
		return shared.ExecuteResponse{}, err
	}

	// Stage 1: static validation in Go. The child validates again with
	// CPython's own ast, from the same rules table.
	if findings := b.validator.Check(ctx, req.Code, req.AllowedImports); len(findings) > 0 {
		res := shared.Rejected(findings, p.Limits())
		res.DurationMS = msSince(start)
		return shared.ExecuteResponse{Result: res}, nil
	}

	b.mu.RLock()
	cfg, sem := b.cfg, b.sem
	b.mu.RUnlock()
	select {
	case sem <- struct{}{}:
		defer func() { <-sem }()
	case <-ctx.Done():
		return shared.ExecuteResponse{}, fmt.Errorf("waiting for a free slot: %w", ctx.Err())
	}

	// Stage 2: run.
	res, err := b.run(ctx, cfg.Python, runner.Request{
		Code:           req.Code,
		Args:           p.Args,
		AllowedImports: req.AllowedImports,
		Rules:          validator.RulesJSON(),
	}.WithLimits(p.Resolved), p.Timeout)
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	res.Limits = p.Limits()
	res.DurationMS = msSince(start)
	return shared.ExecuteResponse{Result: res}, nil
}

// run starts one interpreter with the shared runner, feeds it the request
// and classifies the outcome.
func (b *Backend) run(ctx context.Context, python string, req runner.Request, timeout time.Duration) (shared.ExecutionResult, error) {
	var res shared.ExecutionResult
	payload, err := req.Encode()
	if err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "orqest-pyexec-")
	if err != nil {
		return res, fmt.Errorf("temporary directory: %w: %w", err, shared.ErrInternal)
	}
	defer os.RemoveAll(dir)

	// fd 3 carries the runner's one JSON response.
	respR, respW, err := os.Pipe()
	if err != nil {
		return res, fmt.Errorf("pipe: %w: %w", err, shared.ErrInternal)
	}
	defer respR.Close()
	stdout := &cappedBuffer{limit: req.MaxOutputBytes}
	stderr := &cappedBuffer{limit: req.MaxOutputBytes}
	argv := runner.Argv(python)
	cmd := &exec.Cmd{
		Path:       python,
		Args:       argv,
		Env:        []string{},
		Dir:        dir,
		Stdin:      bytes.NewReader(payload),
		Stdout:     stdout,
		Stderr:     stderr,
		ExtraFiles: []*os.File{respW},
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,            // one kill reaches every descendant
			Pdeathsig: syscall.SIGKILL, // the child dies with the plugin
		},
		WaitDelay: time.Second, // do not wait forever for pipes a descendant holds
	}
	if err := cmd.Start(); err != nil {
		respW.Close()
		return res, fmt.Errorf("start %s: %w: %w", python, err, shared.ErrUnavailable)
	}
	respW.Close()
	pid := cmd.Process.Pid
	// The runner applies these too; setting them from here means they hold
	// even if the child never gets that far.
	memBytes := uint64(req.MemoryMB) << 20
	_ = unix.Prlimit(pid, unix.RLIMIT_AS, &unix.Rlimit{Cur: memBytes, Max: memBytes}, nil)
	cpu := uint64(req.CPUSeconds)
	_ = unix.Prlimit(pid, unix.RLIMIT_CPU, &unix.Rlimit{Cur: cpu, Max: cpu + 1}, nil)

	// The wall clock and the caller's context both kill the process group.
	var mu sync.Mutex
	var cause string
	kill := func(why string) {
		mu.Lock()
		if cause == "" {
			cause = why
		}
		mu.Unlock()
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
	timer := time.AfterFunc(timeout, func() { kill("timeout") })
	stop := context.AfterFunc(ctx, func() { kill("cancelled") })

	// Read the response; the runner may write a result as large as
	// max_output_bytes plus its envelope.
	respCh := make(chan []byte, 1)
	go func() {
		data, _ := io.ReadAll(io.LimitReader(respR, int64(req.MaxOutputBytes)+(1<<20)))
		_, _ = io.Copy(io.Discard, respR)
		respCh <- data
	}()
	waitErr := cmd.Wait()
	timer.Stop()
	stop()
	_ = syscall.Kill(-pid, syscall.SIGKILL) // anything left in the group
	data := <-respCh

	res.Stdout, res.StdoutTruncated = stdout.result()
	res.Stderr, res.StderrTruncated = stderr.result()
	mu.Lock()
	why := cause
	mu.Unlock()

	if why == "cancelled" {
		return res, fmt.Errorf("execution cancelled: %w", ctx.Err())
	}
	if why == "timeout" {
		return fail(res, shared.KindTimeout, fmt.Sprintf("execution timed out after %v", timeout)), nil
	}
	if len(bytes.TrimSpace(data)) > 0 {
		resp, err := runner.ParseResponse(data)
		if err != nil {
			return res, fmt.Errorf("%v: %w", err, shared.ErrInternal)
		}
		if err := resp.Apply(&res); err != nil {
			return res, err
		}
		return res, nil
	}
	// No response: the kernel stopped the child.
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		switch ws.Signal() {
		case syscall.SIGXCPU, syscall.SIGKILL:
			if cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime() >= time.Duration(req.CPUSeconds)*time.Second {
				return fail(res, shared.KindTimeout, fmt.Sprintf("CPU time limit of %ds exceeded", req.CPUSeconds)), nil
			}
		case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGABRT:
			// Most often an allocation that failed under RLIMIT_AS.
			return fail(res, shared.KindMemory, fmt.Sprintf("python died with %v (memory limit %d MB)", ws.Signal(), req.MemoryMB)), nil
		}
		return fail(res, shared.KindKilled, fmt.Sprintf("python was killed by %v", ws.Signal())), nil
	}
	return res, fmt.Errorf("python exited without a response (%v); stderr: %s: %w", waitErr, res.Stderr, shared.ErrInternal)
}

// fail fills in a failed result.
func fail(res shared.ExecutionResult, kind shared.ErrorKind, msg string) shared.ExecutionResult {
	res.Success, res.Output, res.ErrorKind, res.Error = false, nil, kind, msg
	return res
}

func msSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}

// cappedBuffer keeps the first limit bytes written to it and counts the
// rest, so the child never blocks on a full pipe.
type cappedBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	total int
}

// Write never fails. It keeps up to utf8.UTFMax bytes beyond the limit so
// that result can cut on a rune boundary.
func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += len(p)
	if room := c.limit + utf8.UTFMax - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// result returns the kept text, cut to the limit on a rune boundary and made
// valid UTF-8 (protobuf strings must be), and whether anything was cut.
func (c *cappedBuffer) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := runner.TruncateUTF8(c.buf.String(), c.limit)
	return strings.ToValidUTF8(s, "\ufffd"), c.total > c.limit
}

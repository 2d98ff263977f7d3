package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// Per-agent virtual environments.
//
// An agent that names dependencies gets its own venv, created on first use
// under <workdir>/venvs/<agent_id> (the /workspace tmpfs: the root file
// system is read-only) with `python3 -I -m venv --without-pip`. Its wheels
// are unpacked into the venv's site-packages by the runtime itself (see
// deps.go): no pip, no network. Later calls of the same agent run in the same
// venv, with or without dependencies; other agents never see it (their
// children get only their own site-packages on sys.path).
//
// The Python child runs with -I -S, so site.py never activates the venv:
// the runner appends the venv's site-packages to sys.path itself
// (runner.Request.ExtraSysPath, after the stdlib, so a wheel cannot shadow
// a stdlib module), and the child's interpreter is the venv's bin/python3.
// The agent's code imports a dependency only if it is also in
// allowed_imports (the runner's import shim).
//
// The agents run as the same uid: the venv separates what each agent's code
// can import, not what an agent that is allowed `os` could read.

// venvCreateTimeout bounds `python3 -m venv`.
const venvCreateTimeout = 60 * time.Second

// envManager owns the per-agent venvs of this container.
type envManager struct {
	python     string // base interpreter
	root       string // <workdir>/venvs
	wheelDir   string // where wheels are read from ("" = none configured)
	nativeRoot string // where native wheels go, per agent ("" = refused)
	allowed    []string
	log        *slog.Logger

	mu     sync.Mutex
	agents map[string]*agentEnv
}

// agentEnv is one agent's venv and what was installed into it.
type agentEnv struct {
	mu        sync.Mutex // serialises installs of this agent
	agent     string
	dir       string
	python    string            // <dir>/bin/python3
	site      string            // <dir>/lib/pythonX.Y/site-packages
	cp        string            // the venv's CPython as a wheel tag: "cp311"
	native    string            // <nativeRoot>/<agent>, once a native wheel is installed
	installed map[string]string // normalised name -> version
}

func newEnvManager(python, workdir string, hello rtproto.Hello, log *slog.Logger) *envManager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &envManager{
		python:     python,
		root:       filepath.Join(workdir, "venvs"),
		wheelDir:   hello.WheelDir,
		nativeRoot: hello.NativeDir,
		allowed:    append([]string(nil), hello.AllowedPackages...),
		log:        log,
		agents:     map[string]*agentEnv{},
	}
}

// check refuses dependencies outside allowed_packages (ErrPermissionDenied)
// or malformed ones (ErrInvalidArgument). It touches nothing.
func (m *envManager) check(deps []string) error {
	if m == nil {
		if len(deps) > 0 {
			return fmt.Errorf("dependencies: this runtime has no package configuration: %w", shared.ErrFailedPrecondition)
		}
		return nil
	}
	_, err := shared.CheckDependencies(deps, m.allowed)
	return err
}

// prepare returns the interpreter and extra sys.path of agentID's call:
// the base interpreter and nothing when the agent has no venv and asks for
// no dependencies; otherwise its venv (created on first use) with deps
// installed. agentID must have passed rtproto.CheckID (checked again here
// before any filesystem operation).
func (m *envManager) prepare(ctx context.Context, agentID string, deps []string) (string, []string, error) {
	if m == nil {
		if len(deps) > 0 {
			return "", nil, fmt.Errorf("dependencies: this runtime has no package configuration: %w", shared.ErrFailedPrecondition)
		}
		return "", nil, nil
	}
	if err := rtproto.CheckID("agent_id", agentID); err != nil {
		return "", nil, err
	}
	reqs, err := shared.CheckDependencies(deps, m.allowed)
	if err != nil {
		return "", nil, err
	}
	m.mu.Lock()
	env := m.agents[agentID]
	if env == nil && len(reqs) == 0 {
		m.mu.Unlock()
		return m.python, nil, nil
	}
	if env == nil {
		env = &agentEnv{agent: agentID, dir: filepath.Join(m.root, agentID), installed: map[string]string{}}
		m.agents[agentID] = env
	}
	m.mu.Unlock()

	env.mu.Lock()
	defer env.mu.Unlock()
	if env.site == "" {
		if len(reqs) > 0 && m.wheelDir == "" {
			// Fail before creating anything.
			return "", nil, fmt.Errorf("dependencies %v: no package source is configured (set wheel_dir in the docker sandbox's config block): %w", deps, shared.ErrFailedPrecondition)
		}
		if err := m.create(ctx, env); err != nil {
			return "", nil, err
		}
	}
	if len(reqs) > 0 {
		if err := m.install(ctx, env, reqs); err != nil {
			return "", nil, err
		}
	}
	if env.native != "" {
		return env.python, []string{env.site, env.native}, nil
	}
	return env.python, []string{env.site}, nil
}

// nativeSite returns the agent's directory of native wheels,
// <nativeRoot>/<agent> (on the exec-allowed mount), making it on first
// use: the runtime's (0755), so the agent's children read and map what is
// in it and change nothing. Only the agent's own calls get it on sys.path
// (and through Landlock).
func (m *envManager) nativeSite(env *agentEnv) (string, error) {
	if env.native != "" {
		return env.native, nil
	}
	if err := rtproto.CheckID("agent_id", env.agent); err != nil {
		return "", err
	}
	dir := filepath.Join(m.nativeRoot, env.agent)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("native wheels' directory: %v: %w", err, shared.ErrInternal)
	}
	env.native = dir
	return dir, nil
}

// create makes the agent's venv with `python3 -I -m venv --without-pip`.
func (m *envManager) create(ctx context.Context, env *agentEnv) error {
	start := time.Now()
	// 0711: the agents' Python processes (uid 65534) traverse it to their
	// own venv (0755, as python3 -m venv makes it) but cannot list it.
	if err := os.MkdirAll(m.root, 0o711); err != nil {
		return fmt.Errorf("venv root: %v: %w", err, shared.ErrInternal)
	}
	// A directory left over by a failed creation is replaced.
	if err := os.RemoveAll(env.dir); err != nil {
		return fmt.Errorf("venv: %v: %w", err, shared.ErrInternal)
	}
	cctx, cancel := context.WithTimeout(ctx, venvCreateTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, m.python, "-I", "-m", "venv", "--without-pip", env.dir)
	cmd.Env = []string{}
	cmd.Dir = m.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(env.dir)
		return fmt.Errorf("creating the venv of the agent (python3 -m venv; the image needs python3-venv on Debian): %v: %s: %w",
			err, strings.TrimSpace(string(out)), shared.ErrUnavailable)
	}
	sites, _ := filepath.Glob(filepath.Join(env.dir, "lib", "python3*", "site-packages"))
	if len(sites) != 1 {
		_ = os.RemoveAll(env.dir)
		return fmt.Errorf("venv %s: want one lib/python3*/site-packages, found %v: %w", env.dir, sites, shared.ErrInternal)
	}
	py := filepath.Join(env.dir, "bin", "python3")
	if _, err := os.Stat(py); err != nil {
		_ = os.RemoveAll(env.dir)
		return fmt.Errorf("venv %s has no bin/python3: %v: %w", env.dir, err, shared.ErrInternal)
	}
	env.site, env.python = sites[0], py
	// lib/python3.11/site-packages: CPython 3.11, wheel tag cp311.
	env.cp = "cp" + strings.ReplaceAll(strings.TrimPrefix(filepath.Base(filepath.Dir(sites[0])), "python"), ".", "")
	m.log.Info("agent venv created", "dir", env.dir, "ms", time.Since(start).Milliseconds())
	return nil
}

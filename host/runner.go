package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/orqest/sandbox/shared/plugin"
)

// pipeDrain is how long the stdout and stderr of a killed plugin may still
// be read (its last log lines) before the host closes its ends of them: a
// descendant that left the plugin's process group may hold the other ends
// open for as long as it lives.
const pipeDrain = 250 * time.Millisecond

// errLaunchAborted refuses to start a plugin whose launch was already given
// up (its context ended, or it was killed, before the process started).
var errLaunchAborted = errors.New("the launch was abandoned before the plugin started")

// pluginRunner is the go-plugin runner of one plugin process (its
// ClientConfig.RunnerFunc): the host, rather than go-plugin's own runner,
// starts the process and owns both its pipes. go-plugin reads stdout and
// stderr to their end before it reaps the process, so a child that still
// holds them would keep every Kill waiting for as long as the child lives;
// here a kill ends the whole process group and, pipeDrain later, closes the
// host's ends of the pipes, whoever else holds them.
type pluginRunner struct {
	cmd    *exec.Cmd
	entry  PluginEntry
	logger hclog.Logger

	mu      sync.Mutex
	started bool
	killed  bool
	pid     int
	stdout  *os.File // the read ends; closePipes closes them
	stderr  *os.File

	closeOnce sync.Once
	// socketDir is the directory go-plugin made for the plugin's socket
	// (the RunnerFunc's third argument); it goes when the process does.
	socketDir  string
	removeOnce sync.Once
}

var _ runner.Runner = (*pluginRunner)(nil)

// newPluginRunner prepares (does not start) the process of plugin e with
// environment env, in its own process group (setProcAttrs).
func newPluginRunner(e PluginEntry, env []string, logger hclog.Logger) *pluginRunner {
	cmd := exec.Command(e.Path)
	cmd.Env = env
	setProcAttrs(cmd)
	return &pluginRunner{cmd: cmd, entry: e, logger: logger}
}

// runnerFunc is the ClientConfig.RunnerFunc that hands r to go-plugin. spec
// is go-plugin's description of the command: its environment carries the
// handshake's variables, which are added to r's.
func (r *pluginRunner) runnerFunc(_ hclog.Logger, spec *exec.Cmd, socketDir string) (runner.Runner, error) {
	r.cmd.Env = append(r.cmd.Env, spec.Env...)
	r.socketDir = socketDir
	return r, nil
}

// removeSocketDir removes the plugin's socket directory, once: go-plugin
// makes it for a RunnerFunc and leaves its removal to the runner.
func (r *pluginRunner) removeSocketDir() {
	r.removeOnce.Do(func() {
		if r.socketDir != "" {
			_ = os.RemoveAll(r.socketDir)
		}
	})
}

// Start starts the process. The plugin's sha256, when the policy declares
// one, is checked once more right before (it was checked before the launch
// began; this narrows the window in which the file could change).
func (r *pluginRunner) Start(context.Context) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() {
		if err != nil {
			r.removeSocketDir() // no process will reap it: go-plugin leaves it to the runner
		}
	}()
	if r.killed {
		return errLaunchAborted
	}
	if want := r.entry.ExpectedSHA256; want != "" {
		got, err := FileSHA256(r.entry.Path)
		if err != nil {
			return fmt.Errorf("verify checksum: %w", err)
		}
		if got != want {
			return fmt.Errorf("plugin %q at %s has sha256 %s, policy requires %s: %w", r.entry.Name, r.entry.Path, got, want, ErrChecksumMismatch)
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	r.cmd.Stdout, r.cmd.Stderr = outW, errW
	err = r.cmd.Start()
	outW.Close() // the child's now
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	r.started, r.pid, r.stdout, r.stderr = true, r.cmd.Process.Pid, outR, errR
	r.logger.Debug("plugin started", "path", r.entry.Path, "pid", r.pid)
	return nil
}

// Wait reaps the process and removes its socket directory. go-plugin calls
// it once both pipes have ended.
func (r *pluginRunner) Wait(context.Context) error {
	defer r.removeSocketDir()
	return r.cmd.Wait()
}

// Kill implements runner.Runner: kill.
func (r *pluginRunner) Kill(context.Context) error {
	r.kill()
	return nil
}

// kill SIGKILLs the plugin and everything in its process group, and closes
// the host's ends of its pipes pipeDrain later. A runner not started yet
// never starts. It may be called any number of times, from any goroutine.
func (r *pluginRunner) kill() {
	r.mu.Lock()
	first := !r.killed
	r.killed = true
	started, pid := r.started, r.pid
	r.mu.Unlock()
	if !started {
		r.removeSocketDir()
		return
	}
	killGroup(pid)
	_ = r.cmd.Process.Kill() // where there are no process groups; ErrProcessDone once reaped
	r.removeSocketDir()      // nothing listens there any more
	if first {
		time.AfterFunc(pipeDrain, r.closePipes)
	}
}

func (r *pluginRunner) closePipes() {
	r.closeOnce.Do(func() {
		r.stdout.Close()
		r.stderr.Close()
	})
}

// Stdout implements runner.Runner: the pipe go-plugin reads the handshake from.
func (r *pluginRunner) Stdout() io.ReadCloser { return r.stdout }

// Stderr implements runner.Runner: the plugin's log lines.
func (r *pluginRunner) Stderr() io.ReadCloser { return r.stderr }

// Name implements runner.Runner.
func (r *pluginRunner) Name() string { return r.entry.Path }

// ID implements runner.Runner: the process id.
func (r *pluginRunner) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strconv.Itoa(r.pid)
}

// Diagnose implements runner.Runner: what go-plugin adds to the error of a
// handshake it could not read.
func (r *pluginRunner) Diagnose(context.Context) string {
	return fmt.Sprintf("%s did not write the go-plugin handshake line on its stdout: is it an orqest-sandbox plugin (%s<name>, serving with shared/plugin.Serve) built for this platform?",
		r.entry.Path, plugin.PluginPrefix)
}

// PluginToHost implements runner.Runner: host and plugin share addresses.
func (r *pluginRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

// HostToPlugin implements runner.Runner: host and plugin share addresses.
func (r *pluginRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}

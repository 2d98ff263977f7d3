package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// notebook is an agent's stateful interpreter and what it was started
// for: a call for another interpreter or sys.path (the agent's
// dependencies moved its venv) replaces it, and the state is lost.
type notebook struct {
	nb  *pyproc.Notebook
	key string
}

// runStateful runs job in agent's stateful interpreter (rtproto.
// ExecuteArgs.Stateful), starting one when the agent has none or the last
// one ended. The container is the session, so an agent's interpreter is
// the (session, agent)'s: other agents, other sessions (other containers)
// and stateless calls (fresh processes) never see its globals.
//
// The result's StateLost says the globals earlier calls left are gone:
// this call's limits killed the interpreter (the next call starts clean),
// or it found its interpreter ended, or replaced for a new environment,
// and ran in a new one.
func (e *executor) runStateful(ctx context.Context, agent, dir, python string, extraPath, readPath []string, seal *pyproc.SealInfo, job pyproc.Job) (shared.ExecutionResult, error) {
	key := notebookKey(python, extraPath, readPath)
	nb, replaced, err := e.notebook(ctx, agent, dir, python, key, extraPath, readPath, seal)
	if err != nil {
		return shared.ExecutionResult{}, err
	}
	// The globals a paused session kept go into its agent's new interpreter.
	note := e.loadPending(ctx, agent, nb)
	res, lost, err := nb.Run(ctx, job)
	if errors.Is(err, pyproc.ErrNotebookGone) {
		// It ended between calls (killed from outside, crashed): a new one
		// runs this call, and the caller learns its state went.
		e.dropNotebook(agent, nb)
		if nb, _, err = e.notebook(ctx, agent, dir, python, key, extraPath, readPath, seal); err != nil {
			return shared.ExecutionResult{}, err
		}
		replaced = true
		res, lost, err = nb.Run(ctx, job)
	}
	if lost {
		e.dropNotebook(agent, nb)
		e.logger().Info("stateful interpreter ended by its call; its state is lost", "agent", agent, "pid", nb.PID(), "error_kind", res.ErrorKind)
	}
	if err != nil {
		return res, err
	}
	res.StateLost = lost || replaced
	res.Stderr = note + res.Stderr
	if lost && !res.Success {
		res.Error = strings.TrimRight(res.Error, "\n") + " (the stateful session's interpreter was killed: its state is lost; the next stateful call starts clean)"
	}
	return res, nil
}

// notebookKey is what an agent's stateful interpreter was started for: its
// interpreter and sys.path (extraPath) and what it may read.
func notebookKey(python string, extraPath, readPath []string) string {
	return python + "\x00" + strings.Join(extraPath, "\x00") + "\x00\x00" + strings.Join(readPath, "\x00")
}

// notebook returns agent's live stateful interpreter for key, starting
// one (replaced: a previous one had ended or served another key) that
// imports the policy's modules (e.prepare, from extraPath) before it is
// ready.
func (e *executor) notebook(ctx context.Context, agent, dir, python, key string, extraPath, readPath []string, seal *pyproc.SealInfo) (*pyproc.Notebook, bool, error) {
	e.nbMu.Lock()
	defer e.nbMu.Unlock()
	cur := e.notebooks[agent]
	if cur != nil && cur.key == key && cur.nb.Alive() {
		return cur.nb, false, nil
	}
	replaced := cur != nil
	if cur != nil {
		cur.nb.Close()
		delete(e.notebooks, agent)
	}
	if len(e.notebooks) >= maxNotebooks {
		return nil, false, fmt.Errorf("stateful call: this session already has %d agents with a stateful interpreter (the most it keeps): %w", maxNotebooks, shared.ErrUnavailable)
	}
	nb, err := pyproc.StartNotebook(ctx, runner.Argv(python), runner.Request{
		Seal:           e.childSeal(seal, readPath),
		Rules:          e.rules,
		Classes:        e.classes,
		ExtraSysPath:   extraPath,
		ExtraReadPaths: e.system.dataDirs(),
		Keep:           runner.KeepProgram(), // save_state, restore_state (keep.go)
	}, pyproc.NotebookOptions{Dir: dir, Stderr: logWriter{e.logger()}, Logger: e.logger(), Env: e.pythonEnv(), Prepare: e.prepare, Core: e.core})
	if err != nil {
		return nil, false, fmt.Errorf("stateful call: %w", err)
	}
	if e.notebooks == nil {
		e.notebooks = map[string]*notebook{}
	}
	e.notebooks[agent] = &notebook{nb: nb, key: key}
	e.logger().Debug("stateful interpreter started", "agent", agent, "pid", nb.PID())
	return nb, replaced, nil
}

// dropNotebook forgets agent's interpreter nb (ended) if it is still the
// agent's.
func (e *executor) dropNotebook(agent string, nb *pyproc.Notebook) {
	e.nbMu.Lock()
	defer e.nbMu.Unlock()
	if cur := e.notebooks[agent]; cur != nil && cur.nb == nb {
		delete(e.notebooks, agent)
	}
	nb.Close()
}

// closeNotebooks ends every stateful interpreter.
func (e *executor) closeNotebooks() {
	e.nbMu.Lock()
	defer e.nbMu.Unlock()
	for agent, n := range e.notebooks {
		n.nb.Close()
		delete(e.notebooks, agent)
	}
}

package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// sessionSetup is what the host's wall clock allows a session backend
// (one with the sessions capability) beyond an execution's timeout for the
// work a call may do before its code runs: start a container or pod for a
// call without a session (or for a session whose agent died), install the
// call's dependencies. The default open_timeout of the kubernetes plugin,
// the longest of the tiers'.
const sessionSetup = 60 * time.Second

// execGrace is how long past its timeout an execution may run before the
// host ends it, and then how long the plugin has to stop: 10% of the
// timeout, at least a second.
func execGrace(timeout time.Duration) time.Duration { return max(time.Second, timeout/10) }

// wallClock is the host's clock over one execution. The host does not
// trust a backend to enforce the timeout: at budget it tells the plugin to
// end the call (plugin.WithCancelAfter: the plugin's handler context ends),
// and at hard, when the plugin still has not returned, it stops waiting
// and kills the plugin, so that the execution surely ends (the next call
// relaunches it).
type wallClock struct {
	timeout time.Duration // the call's resolved timeout
	budget  time.Duration // timeout + grace (+ sessionSetup): the plugin is told to stop
	hard    time.Duration // budget + grace: the plugin is killed
}

// clockFor returns the host's clock over an execution with timeout on s
// (the plugin's Info says whether it is a session backend).
func (s *Sandbox) clockFor(ctx context.Context, timeout time.Duration) (wallClock, error) {
	info, err := s.inst.infoOf(ctx)
	if err != nil {
		return wallClock{}, err
	}
	g := execGrace(timeout)
	budget := timeout + g
	if info.Has(shared.CapSessions) {
		budget += sessionSetup
	}
	return wallClock{timeout: timeout, budget: budget, hard: budget + g}, nil
}

// context returns the context of the plugin call, derived from the
// caller's ctx: the plugin is told to stop at budget, and the call ends at
// hard. The call timeout does not apply (withOwnClock).
func (c wallClock) context(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(withOwnClock(plugin.WithCancelAfter(ctx, c.budget)), c.hard)
}

// overrun returns the result of an execution the host's wall clock ended,
// false when it ended otherwise. ctx is the caller's context, cctx the
// call's (wallClock.context), served the plugin the call went to (nil if
// it reached none), elapsed the call's time. The result is a timeout
// (shared.KindTimeout, not a success) when
//
//   - the plugin had not returned at the hard deadline: the host kills it
//     (the execution may be running in it still) and the next call
//     relaunches it;
//   - it returned past the budget, when the host had told it to stop,
//     with anything but a timeout of its own (whose result stands): a late
//     success is discarded, the plugin's output kept;
//   - the plugin process ended during the call after its timeout had
//     passed (tier 0 ends its process when a C-level loop cannot be
//     interrupted): the code earned its timeout, and the next call
//     relaunches the plugin.
//
// A call its caller ended is none of these: its error stands.
func (s *Sandbox) overrun(ctx, cctx context.Context, c wallClock, limits shared.Limits, resp shared.ExecuteResponse, err error, elapsed time.Duration, served shared.Sandbox) (shared.ExecutionResult, bool) {
	if ctx.Err() != nil {
		return shared.ExecutionResult{}, false
	}
	var why string
	switch {
	case served != nil && err != nil && (errors.Is(cctx.Err(), context.DeadlineExceeded) || elapsed >= c.hard):
		// The hard deadline passed (elapsed is checked too: under load the
		// context's timer may not have fired yet when the call's error
		// arrives).
		s.inst.discardServing(served)
		s.host.opts.logger.Warn("plugin did not stop an execution past its timeout; killed", "sandbox", s.cfg.Name, "plugin", s.cfg.Plugin,
			"timeout", c.timeout.String(), "waited", elapsed.Round(time.Millisecond).String())
		why = fmt.Sprintf("the plugin had not returned %.2fs after the call began, even when told to stop, and was killed; it is relaunched on the next call", c.hard.Seconds())
	case elapsed >= c.budget && err == nil && resp.Result.ErrorKind == shared.KindTimeout:
		return shared.ExecutionResult{}, false // the plugin's own timeout, if late
	case elapsed >= c.budget && err == nil:
		why = fmt.Sprintf("the plugin's result came %.2fs after the call began, past the %.2fs the host allows; it is discarded", elapsed.Seconds(), c.budget.Seconds())
	case err != nil && errors.Is(err, shared.ErrPluginShutdown) && elapsed >= c.timeout:
		return shared.ExecutionResult{
			Output:     json.RawMessage("null"),
			Error:      fmt.Sprintf("sandbox execution timed out after %.2fs; the plugin process ended during the call, after the timeout, and is relaunched on the next call", c.timeout.Seconds()),
			ErrorKind:  shared.KindTimeout,
			DurationMS: float64(elapsed.Microseconds()) / 1000,
			Limits:     limits,
		}, true
	case elapsed >= c.budget:
		why = fmt.Sprintf("the plugin had no result %.2fs after the call began and stopped when the host told it to", c.budget.Seconds())
	default:
		return shared.ExecutionResult{}, false
	}
	r := shared.ExecutionResult{
		Output:     json.RawMessage("null"),
		Error:      fmt.Sprintf("sandbox execution timed out after %.2fs: the host's wall clock ended it (%s)", c.timeout.Seconds(), why),
		ErrorKind:  shared.KindTimeout,
		DurationMS: float64(elapsed.Microseconds()) / 1000,
		Limits:     limits,
	}
	if err == nil {
		r.Stdout, r.Stderr = resp.Result.Stdout, resp.Result.Stderr
		r.StdoutTruncated, r.StderrTruncated = resp.Result.StdoutTruncated, resp.Result.StderrTruncated
	}
	return r, true
}

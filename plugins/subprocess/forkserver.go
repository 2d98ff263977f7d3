package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/pyrunner"
)

// ModeForkServer keeps one warm, sealed zygote per plugin that forks a
// fresh child for every execution (the default). The zygote and its client
// are internal/pyproc.ForkServer.
const ModeForkServer = "forkserver"

// forkServerPool is how many pre-forked, sealed children the zygote keeps
// ready: enough that two concurrent callers each find one while the
// zygote refills behind them.
const forkServerPool = 4

// runFork runs req in a child forked by the zygote and classifies the
// outcome, like runSpawn. rules is the rules table for the in-child
// checker and the builtins.
func (b *Backend) runFork(ctx context.Context, cfg Config, seal *sealInfo, req pyrunner.Request, timeout time.Duration, maxOut int, rules json.RawMessage) (shared.ExecutionResult, error) {
	if err := ctx.Err(); err != nil {
		return shared.ExecutionResult{}, fmt.Errorf("execute: %w", err)
	}
	fs, err := b.forkServer(cfg, seal, rules)
	if err != nil {
		return shared.ExecutionResult{}, err
	}
	return fs.Run(ctx, pyproc.Job{Request: req, Timeout: timeout, MaxOutput: maxOut, OnStart: b.onSpawn})
}

// forkServer returns the running zygote for cfg, (re)starting it when it
// died or the configuration changed.
func (b *Backend) forkServer(cfg Config, s *sealInfo, rules json.RawMessage) (*pyproc.ForkServer, error) {
	fcfg := pyrunner.ForkServerConfig{Preload: cfg.Preload, Seal: s.seal(b.test.disable), Rules: rules, Pool: forkServerPool}
	keyJSON, _ := json.Marshal(fcfg)
	key := cfg.Python + "\x00" + string(keyJSON) + "\x00" + b.test.program
	b.fsMu.Lock()
	defer b.fsMu.Unlock()
	if b.fs != nil && b.fsKey == key && b.fs.Alive() {
		return b.fs, nil
	}
	if old := b.fs; old != nil {
		if old.Alive() {
			b.logger.Debug("fork-server configuration changed; restarting", "pid", old.PID())
		} else {
			b.logger.Warn("fork-server died; restarting", "pid", old.PID(), "error", old.Err())
		}
		b.fs = nil
		go old.Close()
	}
	fs, err := pyproc.StartForkServer(b.argv(cfg.Python, pyrunner.ForkServerArg), fcfg, pyproc.ForkServerOptions{
		Logger: b.logger,
		Stderr: b.logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
	})
	if err != nil {
		return nil, err
	}
	b.fs, b.fsKey = fs, key
	return fs, nil
}

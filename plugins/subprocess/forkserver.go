package subprocess

import (
	"context"
	"encoding/json"
	"fmt"
	"unsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// ModeForkServer keeps a warm, sealed zygote per tenant (the request's
// UserID) that forks a fresh child for every execution (the default). The
// zygote and its client are internal/pyproc.ForkServer; a tenant's zygote
// holds only what that tenant's calls warmed.
const ModeForkServer = "forkserver"

// forkServerPool is how many pre-forked, sealed children the zygote keeps
// ready: enough that two concurrent callers each find one while the
// zygote refills behind them.
const forkServerPool = 4

// runFork runs req under the limits l in a child forked by tenant's
// zygote and classifies the outcome, like runSpawn. rules is the rules
// table for the in-child checker and the builtins.
func (b *Backend) runFork(ctx context.Context, cfg Config, seal *sealInfo, tenant string, req runner.Request, l shared.Resolved, rules json.RawMessage, onOutput func(string, []byte)) (shared.ExecutionResult, error) {
	if err := ctx.Err(); err != nil {
		return shared.ExecutionResult{}, fmt.Errorf("execute: %w", err)
	}
	key, start := b.forkServer(cfg, seal, rules)
	return b.zygotes.Run(ctx, tenant, key, start, pyproc.Job{Request: req, Limits: l, OnStart: b.onSpawn, OnOutput: onOutput})
}

// forkServer returns the key of the zygote configuration cfg asks for and
// the function that starts one; the pool (re)starts a tenant's zygote
// when it died or the configuration changed.
func (b *Backend) forkServer(cfg Config, s *sealInfo, rules json.RawMessage) (string, func() (*pyproc.ForkServer, error)) {
	// The zygote serves one configuration: python, preload, the layers in
	// force (s is probed once per interpreter and names its seal together
	// with the test hooks), the hot pages, the C loop, warm bodies and the
	// rules table. The key names each by value or identity, so it costs a
	// short Sprintf per call; the seal's JSON (its seccomp programs) is
	// built only when a zygote starts.
	noHot := cfg.HotPages != nil && !*cfg.HotPages
	warm := cfg.Warm == nil || *cfg.Warm
	b.fsMu.Lock()
	core, coreID, coreWhy := b.core, b.coreID, b.coreWhy
	b.fsMu.Unlock()
	key := fmt.Sprintf("%p\x00%q\x00%t\x00%s\x00%s\x00%t\x00%p/%d\x00%q\x00%q\x00%p/%d", s, cfg.Preload, noHot, cfg.Python, coreID, warm,
		unsafe.SliceData(rules), len(rules), b.test.disable, b.test.readPaths, unsafe.StringData(b.test.program), len(b.test.program))
	return key, func() (*pyproc.ForkServer, error) {
		fcfg := runner.ForkServerConfig{Preload: cfg.Preload, Seal: s.seal(b.test.disable, b.test.readPaths...), Pool: forkServerPool,
			NoHotPages: noHot, Rules: rules}
		fs, err := pyproc.StartForkServer(b.argv(cfg.Python, runner.ForkServerArg), fcfg, pyproc.ForkServerOptions{
			Logger: b.logger,
			Stderr: b.logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
			Core:   core,
			NoWarm: !warm,
		})
		if err != nil {
			return nil, err
		}
		if inC, why := fs.Core(); !inC {
			if why == "" {
				why = coreWhy
			}
			if len(core) > 0 {
				b.logger.Warn("fork-server: the C loop did not load; the zygote loops in Python (slower)", "reason", why)
			} else {
				b.coreMsg.Do(func() {
					b.logger.Info("fork-server: the zygote loops in Python (slower)", "reason", why)
				})
			}
		}
		return fs, nil
	}
}

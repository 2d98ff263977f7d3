package subprocess

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
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

// runFork runs req in a child forked by tenant's zygote and classifies the
// outcome, like runSpawn. rules is the rules table for the in-child
// checker and the builtins.
func (b *Backend) runFork(ctx context.Context, cfg Config, seal *sealInfo, tenant string, req runner.Request, timeout time.Duration, maxOut int, rules json.RawMessage, onOutput func(string, []byte)) (shared.ExecutionResult, error) {
	if err := ctx.Err(); err != nil {
		return shared.ExecutionResult{}, fmt.Errorf("execute: %w", err)
	}
	key, start := b.forkServer(cfg, seal, rules)
	return b.zygotes.Run(ctx, tenant, key, start, pyproc.Job{Request: req, Timeout: timeout, MaxOutput: maxOut, OnStart: b.onSpawn, OnOutput: onOutput})
}

// forkServer returns the key of the zygote configuration cfg asks for and
// the function that starts one; the pool (re)starts a tenant's zygote
// when it died or the configuration changed.
func (b *Backend) forkServer(cfg Config, s *sealInfo, rules json.RawMessage) (string, func() (*pyproc.ForkServer, error)) {
	// The zygote serves one configuration: python, preload, the layers in
	// force (s is probed once per interpreter), the hot pages, the C loop,
	// warm bodies and the rules table (by identity: it is b.rules, or a
	// test's). The key is a digest of all that, computed again only when
	// one of them changes: the seal's JSON (its seccomp programs) is too
	// big to marshal, concatenate and hash per call (~10 % of the plugin's
	// CPU on a trivial execution).
	noHot := cfg.HotPages != nil && !*cfg.HotPages
	warm := cfg.Warm == nil || *cfg.Warm
	fcfg := runner.ForkServerConfig{Preload: cfg.Preload, Seal: s.seal(b.test.disable, b.test.readPaths...), Pool: forkServerPool,
		NoHotPages: noHot}
	b.fsMu.Lock()
	core, coreID, coreWhy := b.core, b.coreID, b.coreWhy
	in := fmt.Sprintf("%p\x00%q\x00%t\x00%s\x00%s\x00%t\x00%p/%d\x00%q\x00%q\x00%p/%d", s, cfg.Preload, noHot, cfg.Python, coreID, warm,
		unsafe.SliceData(rules), len(rules), b.test.disable, b.test.readPaths, unsafe.StringData(b.test.program), len(b.test.program))
	if b.fsKey.in != in {
		keyJSON, _ := json.Marshal(fcfg)
		sum := sha256.Sum256([]byte(cfg.Python + "\x00" + string(keyJSON) + "\x00" + b.test.program + "\x00" + coreID + "\x00" +
			strconv.FormatBool(warm) + "\x00" + fmt.Sprintf("%p/%d", unsafe.SliceData(rules), len(rules))))
		b.fsKey.in, b.fsKey.out = in, hex.EncodeToString(sum[:])
	}
	key := b.fsKey.out
	b.fsMu.Unlock()
	return key, func() (*pyproc.ForkServer, error) {
		fcfg.Rules = rules
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

package subprocess

import (
	"context"
	"strings"
	"sync"

	"github.com/orqest/sandbox/internal/pyproc"
	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// sealInfo is what a probe found (internal/pyproc.SealInfo), seen as tier-1
// capabilities.
type sealInfo struct{ *pyproc.SealInfo }

// caps returns every capability really in force.
func (s *sealInfo) caps() []shared.Capability {
	caps := append([]shared.Capability(nil), baseCaps...)
	if s != nil && s.SealInfo != nil {
		caps = append(caps, sealCaps(s.Layers)...)
	}
	return caps
}

// seal returns the runner's seal config: every layer found is required, so
// a child that cannot establish one fails closed rather than run unsealed.
// read are further paths the sandbox may read (tests only).
func (s *sealInfo) seal(disable []string, read ...string) *runner.Seal {
	return s.Seal(disable, read...)
}

// missingText names the layers not in force, with the reason, for the
// one WARNING Configure logs.
func (s *sealInfo) missingText() string {
	return s.MissingText(func(l string) string { return string(runner.LayerCapability(l)) })
}

var (
	probeMu    sync.Mutex
	probeCache = map[string]*sealInfo{}
)

// probeSeal asks the interpreter which layers it can establish here (op
// "probe": a spawned runner seals itself and reports). The result depends
// only on the interpreter and the kernel, so it is cached per process.
func (b *Backend) probeSeal(ctx context.Context, python string, disable []string) (*sealInfo, error) {
	key := python + "\x00" + strings.Join(disable, ",")
	probeMu.Lock()
	defer probeMu.Unlock()
	if s, ok := probeCache[key]; ok {
		return s, nil
	}
	si, err := pyproc.Probe(ctx, b.argv(python), disable, "", b.logger)
	if err != nil {
		return nil, err
	}
	s := &sealInfo{si}
	probeCache[key] = s
	return s, nil
}

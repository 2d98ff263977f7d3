package docker

import (
	"context"
	"os"

	"github.com/moby/moby/client"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/internal/procfs"
)

// ownerInfo identifies this plugin process on the container labels: pid,
// the pid's start time (so a recycled pid is not mistaken for us) and host.
type ownerInfo struct {
	pid   int
	start string
	host  string
}

func currentOwner() ownerInfo {
	host, _ := os.Hostname()
	return ownerInfo{pid: os.Getpid(), start: procfs.StartTime(os.Getpid()), host: host}
}

func (b *Backend) reapOnce(ctx context.Context) {
	b.mu.Lock()
	done := b.reaped
	b.reaped = true
	b.mu.Unlock()
	if !done {
		if n, err := b.Reap(ctx); err != nil {
			b.logger.Warn("reaper", "error", err)
		} else if n > 0 {
			b.logger.Info("reaper removed containers left by dead owners", "count", n)
		}
		if n := egress.ReapDirs(""); n > 0 {
			b.logger.Info("reaper removed egress socket directories left by dead plugins", "count", n)
		}
	}
}

// Reap removes tier-2 containers of this host whose owner process is gone
// (a host or plugin that crashed). It returns how many it removed.
func (b *Backend) Reap(ctx context.Context) (int, error) {
	dc, err := b.client()
	if err != nil {
		return 0, err
	}
	list, err := dc.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelTier+"="+tierValue),
	})
	if err != nil {
		return 0, classifyDocker("reaper: listing containers", err)
	}
	n := 0
	for _, c := range list.Items {
		if c.Labels[LabelOwnerHost] != b.owner.host {
			continue // another machine's container on a shared engine
		}
		if procfs.Alive(c.Labels[LabelOwnerPID], c.Labels[LabelOwnerStart]) {
			continue
		}
		if err := b.removeContainer(ctx, c.ID); err != nil {
			b.logger.Warn("reaper: removing container", "container", shortID(c.ID), "error", err)
			continue
		}
		b.logger.Info("reaper: removed orphan container", "container", shortID(c.ID), "owner_pid", c.Labels[LabelOwnerPID])
		n++
	}
	return n, nil
}

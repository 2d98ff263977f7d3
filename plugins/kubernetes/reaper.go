package kubernetes

// Nothing outlives its owner. Every pod carries the labels of the plugin
// process that created it (LabelOwner, a random id per Backend; its host,
// pid and the pid's start time). Each Backend keeps a Lease named after
// its owner id in the namespace and renews it every leaseRenew. A pod's
// owner is dead when its Lease is gone or has not been renewed for twice
// its duration (any machine can tell), or, on the owner's own machine, as
// soon as its pid is gone (a SIGKILLed plugin is reaped at the next
// Configure, not a minute later). The reaper (Reap) deletes the pods of
// dead owners and their Leases; it runs at Configure and every
// reapEvery while a Backend is configured.
//
// A plugin that dies also ends its sessions' runtimes at once: the attach
// stream closes, so does the runtime's stdin (StdinOnce), the runtime
// exits and the pod stops running; the reaper then deletes the object.

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/orqest/sandbox/internal/procfs"
)

const (
	leaseDuration = 30 * time.Second
	leaseRenew    = 10 * time.Second
	reapEvery     = 6 // renewals between reaps (a minute)
	// LeasePrefix names the owner Leases: LeasePrefix + owner id.
	LeasePrefix = "orqest-sandbox-owner-"
)

// owner identifies this Backend on its pods.
type owner struct {
	id    string // random, per Backend
	host  string
	pid   int
	start string // the pid's start time (a recycled pid is not us)
}

func currentOwner() owner {
	host, _ := os.Hostname()
	return owner{id: randomHex(8), host: host, pid: os.Getpid(), start: procfs.StartTime(os.Getpid())}
}

// leaseKeeper renews this Backend's Lease until stopped.
type leaseKeeper struct {
	kc   *kubeClient
	stop chan struct{}
	done sync.WaitGroup
}

// startLease creates (or renews) this Backend's Lease in kc's namespace
// and keeps renewing it; a Lease of an earlier configuration (another
// namespace or cluster) is deleted first.
func (b *Backend) startLease(ctx context.Context, kc *kubeClient) error {
	b.stopLease(ctx)
	if err := renewLease(ctx, kc, b.owner); err != nil {
		return err
	}
	lk := &leaseKeeper{kc: kc, stop: make(chan struct{})}
	lk.done.Add(1)
	go func() {
		defer lk.done.Done()
		t := time.NewTicker(leaseRenew)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-lk.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), leaseRenew)
			if err := renewLease(ctx, kc, b.owner); err != nil {
				b.logger.Warn("renewing the owner lease", "error", err)
			}
			if n%reapEvery == 0 {
				if c, err := b.Reap(ctx); err != nil {
					b.logger.Warn("reaper", "error", err)
				} else if c > 0 {
					b.logger.Info("reaper deleted pods left by dead owners", "count", c)
				}
			}
			cancel()
		}
	}()
	b.mu.Lock()
	b.lease = lk
	b.mu.Unlock()
	return nil
}

// stopLease stops renewing and deletes the Lease (Shutdown, reconfigure).
func (b *Backend) stopLease(ctx context.Context) {
	b.mu.Lock()
	lk := b.lease
	b.lease = nil
	b.mu.Unlock()
	if lk == nil {
		return
	}
	close(lk.stop)
	lk.done.Wait()
	err := lk.kc.cs.CoordinationV1().Leases(lk.kc.namespace).Delete(ctx, LeasePrefix+b.owner.id, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		b.logger.Warn("deleting the owner lease", "error", err)
	}
}

// renewLease creates o's Lease or moves its renew time to now.
func renewLease(ctx context.Context, kc *kubeClient, o owner) error {
	api := kc.cs.CoordinationV1().Leases(kc.namespace)
	now := metav1.NewMicroTime(time.Now())
	name := LeasePrefix + o.id
	l, err := api.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		holder := fmt.Sprintf("%s/%d", o.host, o.pid)
		_, err = api.Create(ctx, leaseObject(o, holder, int32(leaseDuration/time.Second), now), metav1.CreateOptions{})
		if err != nil {
			return classify("creating the owner lease "+name, err)
		}
		return nil
	}
	if err != nil {
		return classify("reading the owner lease "+name, err)
	}
	l.Spec.RenewTime = &now
	if _, err := api.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return classify("renewing the owner lease "+name, err)
	}
	return nil
}

// leaseObject is the Lease of owner o.
func leaseObject(o owner, holder string, seconds int32, renewed metav1.MicroTime) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: LeasePrefix + o.id, Labels: map[string]string{LabelManagedBy: managedBy, LabelTier: tierValue, LabelOwner: o.id}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &renewed, RenewTime: &renewed},
	}
}

// Reap deletes the session pods in the namespace whose owner is dead, and
// those owners' Leases. It returns how many pods it deleted.
func (b *Backend) Reap(ctx context.Context) (int, error) {
	kc, err := b.client()
	if err != nil {
		return 0, err
	}
	pods, err := kc.cs.CoreV1().Pods(kc.namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{LabelTier: tierValue}).String()})
	if err != nil {
		return 0, classify("reaper: listing pods", err)
	}
	verdict := map[string]bool{} // owner id -> dead
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		id := p.Labels[LabelOwner]
		if id == b.owner.id {
			continue
		}
		dead, ok := verdict[id]
		if !ok {
			dead = b.ownerDead(ctx, kc, p)
			verdict[id] = dead
		}
		if !dead || p.DeletionTimestamp != nil {
			continue
		}
		if err := kc.cs.CoreV1().Pods(kc.namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil && !apierrors.IsNotFound(err) {
			b.logger.Warn("reaper: deleting a pod", "pod", p.Name, "error", err)
			continue
		}
		b.logger.Info("reaper: deleted the pod of a dead owner", "pod", p.Name, "owner", id, "owner_host", p.Labels[LabelOwnerHost], "owner_pid", p.Labels[LabelOwnerPID])
		n++
	}
	for id, dead := range verdict {
		if dead && id != "" {
			err := kc.cs.CoordinationV1().Leases(kc.namespace).Delete(ctx, LeasePrefix+id, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				b.logger.Warn("reaper: deleting a dead owner's lease", "owner", id, "error", err)
			}
		}
	}
	return n, nil
}

// ownerDead decides for the owner of p: on this machine its pid decides
// at once; otherwise (or with the pid alive) its Lease must exist and be
// fresh.
func (b *Backend) ownerDead(ctx context.Context, kc *kubeClient, p *corev1.Pod) bool {
	id := p.Labels[LabelOwner]
	if id == "" {
		return true // not one of ours as labelled: no owner can claim it
	}
	if p.Labels[LabelOwnerHost] == LabelValue(b.owner.host) && !procfs.Alive(p.Labels[LabelOwnerPID], p.Labels[LabelOwnerStart]) {
		return true
	}
	l, err := kc.cs.CoordinationV1().Leases(kc.namespace).Get(ctx, LeasePrefix+id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Created before any pod: gone means its owner shut down or was
		// reaped. Give a pod created this instant the benefit of the doubt.
		return time.Since(p.CreationTimestamp.Time) > leaseDuration
	}
	if err != nil {
		b.logger.Warn("reaper: reading an owner lease", "owner", id, "error", err)
		return false
	}
	renewed := l.CreationTimestamp.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	return time.Since(renewed) > 2*leaseDuration
}

package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/internal/session"
	"github.com/orqest/sandbox/shared"
)

// closeGrace is how long Close waits for the runtime to exit after its
// stdin closed before it deletes the pod regardless.
const closeGrace = 2 * time.Second

// agent is one session pod: the agent runtime in it, reached with
// `attach` through the API server (stdin carries MCP frames after the
// hello line, stdout MCP, stderr the runtime's JSON log).
type agent struct {
	b         *Backend
	user      string
	label     string
	pod       string         // the pod's name
	uid       string         // the pod's uid (deletion precondition)
	stdin     *io.PipeWriter // the runtime's stdin, through the attach stream
	stdout    *io.PipeReader // the runtime's stdout (MCP)
	detach    context.CancelFunc
	gone      chan struct{} // closed when the attach stream has ended
	attachErr error         // why it ended (set before gone closes)
	stopOnce  sync.Once
	stopErr   error
	// route is the session's egress route (egress.go); nil without a
	// network block.
	route *egress.Route
	// PlainResume: the bound runtime (Pause asks it to save) and, for a
	// resumed pod, the saved state it gets back (pause.go).
	session.PlainResume
}

var _ session.Agent = (*agent)(nil)

// Name implements session.Agent.
func (s *agent) Name() string { return "the session pod " + s.pod }

// Done implements session.Agent: the attach stream has ended.
func (s *agent) Done() <-chan struct{} { return s.gone }

// Connect implements session.Agent: the hello line and MCP over the
// attach stream; a resumed pod then gets its saved state back (pause.go).
func (s *agent) Connect(ctx context.Context, client *mcp.Client, hello rtproto.Hello) (*mcp.ClientSession, error) {
	if s.route != nil { // a warm pod learns its session only now
		s.route.Proxy.SetSession(hello.Session, hello.User)
	}
	cs, err := rtclient.Bind(ctx, client, hello, s.stdin, s.stdout)
	if err != nil && isClosedChan(s.gone) {
		return nil, fmt.Errorf("the attach stream to %s ended before the runtime answered (%v): %w", s.pod, s.attachErr, shared.ErrUnavailable)
	}
	if err != nil {
		return nil, err
	}
	return s.Bound(ctx, cs, rtclient.Target{MCP: cs, Secret: hello.Secret, User: hello.User, Session: hello.Session, Name: s.Name(), Gone: s.gone})
}

func isClosedChan(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// driver starts the backend's session pods (session.Driver).
type driver struct{ b *Backend }

// Start implements session.Driver: a pod of user whose session label is
// label, running and attached; the runtime waits for its hello line.
func (d driver) Start(ctx context.Context, user, label string) (session.Agent, error) {
	kc, err := d.b.client()
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	return d.b.prepare(ctx, kc, d.b.config(), user, label)
}

// prepare creates a pod of user whose session label is label, waits until
// its runtime runs and attaches to its stdio.
func (b *Backend) prepare(ctx context.Context, kc *kubeClient, cfg Config, user, label string) (_ *agent, retErr error) {
	if err := ensureClaim(ctx, kc, cfg, user); err != nil {
		return nil, err
	}
	route, err := b.addRoute(cfg, user, label) // egress.go
	if err != nil {
		return nil, err
	}
	pod := hardenedPod(cfg, b.owner, user, label)
	withEgress(pod, route)
	created, err := kc.cs.CoreV1().Pods(kc.namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		if route != nil {
			_ = route.Close()
		}
		return nil, classify("open: creating the pod", err)
	}
	s := &agent{b: b, user: user, label: label, pod: created.Name, uid: string(created.UID), gone: make(chan struct{}), route: route}
	defer func() {
		if retErr != nil { // before attach: nothing else closes gone
			close(s.gone)
			_ = s.Stop(context.WithoutCancel(ctx))
		}
	}()
	if route != nil {
		if err := b.createEgressPolicy(ctx, kc, created, route); err != nil {
			return nil, err
		}
	}
	running, err := waitRunning(ctx, kc, created)
	if err != nil {
		return nil, err
	}
	if err := bindSource(route, running); err != nil {
		return nil, err
	}
	b.attach(kc, s)
	return s, nil
}

// waitRunning watches pod until its runtime container runs and returns it
// as it then is (its IP in its status). A container that cannot start
// (image missing or not pullable, bad configuration) or a pod that ended
// is ErrUnavailable at once, with the kubelet's reason; an unschedulable
// pod is waited for until ctx ends, and the scheduler's reason is in the
// error.
func waitRunning(ctx context.Context, kc *kubeClient, pod *corev1.Pod) (*corev1.Pod, error) {
	api := kc.cs.CoreV1().Pods(kc.namespace)
	pending := ""
	rv := pod.ResourceVersion
	for {
		w, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod.Name).String(), ResourceVersion: rv})
		if err != nil {
			return nil, classify("open: watching the pod "+pod.Name, err)
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				w.Stop()
				return nil, fmt.Errorf("open: the pod %s was deleted while it started: %w", pod.Name, shared.ErrUnavailable)
			case watch.Error:
				w.Stop()
				rv = "" // e.g. a resource version too old: read it afresh
				continue
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			done, why, err := podStarted(p)
			if err != nil {
				w.Stop()
				return nil, fmt.Errorf("open: the pod %s: %w", pod.Name, err)
			}
			if done {
				w.Stop()
				return p, nil
			}
			if why != "" {
				pending = why
			}
		}
		w.Stop()
		if err := ctx.Err(); err != nil {
			msg := "the pod " + pod.Name + " did not start in time"
			if pending != "" {
				msg += " (" + pending + ")"
			}
			return nil, fmt.Errorf("open: %s: %w: %w", msg, err, shared.ErrUnavailable)
		}
		if rv == "" {
			p, err := api.Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return nil, classify("open: reading the pod "+pod.Name, err)
			}
			if done, _, err := podStarted(p); err != nil {
				return nil, err
			} else if done {
				return p, nil
			}
			rv = p.ResourceVersion
		}
	}
}

// podStarted reports whether p's runtime container runs; why says what it
// waits for, err that it never will.
func podStarted(p *corev1.Pod) (done bool, why string, err error) {
	switch p.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false, "", fmt.Errorf("ended (%s %s) before the runtime was attached: %w", p.Status.Phase, p.Status.Reason, shared.ErrUnavailable)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			why = c.Reason + ": " + c.Message
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != ContainerName {
			continue
		}
		switch {
		case cs.State.Running != nil:
			return true, "", nil
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			return false, "", fmt.Errorf("the runtime exited (%s, code %d: %s) before it was attached: %w", t.Reason, t.ExitCode, t.Message, shared.ErrUnavailable)
		case cs.State.Waiting != nil:
			wt := cs.State.Waiting
			switch wt.Reason {
			case "ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return false, "", fmt.Errorf("%s: %s (is the image on the node, or pullable? `make k8s-up` imports the local one): %w", wt.Reason, wt.Message, shared.ErrUnavailable)
			}
			if wt.Reason != "" {
				why = wt.Reason
			}
		}
	}
	return false, why, nil
}

// attach opens the attach stream to the pod's runtime: its stdin from the
// session's stdin pipe, its stdout (MCP) to the stdout pipe, its stderr
// (the runtime's JSON log) to the plugin's log. The stream lives until the
// runtime exits, the pod goes or the session detaches; then gone closes.
// WebSocket is tried first (the API server's current protocol) and SPDY
// when the server or a proxy does not upgrade to it, as kubectl does.
func (b *Backend) attach(kc *kubeClient, s *agent) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s.stdin, s.stdout = inW, outR
	ctx, cancel := context.WithCancel(context.Background())
	s.detach = cancel
	logW := &rtclient.LogWriter{Log: b.logger.Named("runtime").With("pod", s.pod)}
	go func() {
		err := streamAttach(ctx, kc, s.pod, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: logW})
		if err == nil {
			err = io.EOF
		}
		s.attachErr = err
		outW.CloseWithError(err)
		inR.CloseWithError(err) // a write to a dead stream fails instead of blocking
		logW.Flush()
		close(s.gone)
	}()
}

// streamAttach runs `attach` of the runtime container until it ends.
func streamAttach(ctx context.Context, kc *kubeClient, pod string, opts remotecommand.StreamOptions) error {
	req := kc.cs.CoreV1().RESTClient().Post().Namespace(kc.namespace).Resource("pods").Name(pod).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: ContainerName, Stdin: true, Stdout: true, Stderr: true, TTY: false}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(kc.rest, http.MethodGet, req.URL().String())
	if err != nil {
		return fmt.Errorf("attach (websocket): %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(kc.rest, http.MethodPost, req.URL())
	if err != nil {
		return fmt.Errorf("attach (spdy): %w", err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	return exec.StreamWithContext(ctx, opts)
}

// Stop implements session.Agent: its stdin closes (the runtime exits),
// the attach stream is cancelled, its egress route ends, and the pod and
// its NetworkPolicy are deleted; it returns when
// the API server no longer has the pod. The user's claim stays. Safe to
// call more than once.
func (s *agent) Stop(ctx context.Context) error {
	b := s.b
	s.stopOnce.Do(func() {
		if s.stdin != nil {
			s.stdin.Close()
			// The runtime exits on its stdin's end and the server then
			// ends the attach stream: wait for that (briefly) rather than
			// cut the connection under it.
			select {
			case <-s.gone:
			case <-time.After(closeGrace):
			case <-ctx.Done():
			}
		}
		if s.detach != nil {
			defer s.detach()
		}
		kc, err := b.client()
		if err != nil {
			s.stopErr = errors.Join(err, s.stopEgress(ctx, nil))
			return
		}
		s.stopErr = errors.Join(s.stopEgress(ctx, kc), deletePod(ctx, kc, s.pod, s.uid)) // egress.go
	})
	return s.stopErr
}

// deletePod deletes the pod name (if it still is the one with uid) and
// waits until it is gone.
func deletePod(ctx context.Context, kc *kubeClient, name, uid string) error {
	if name == "" {
		return nil
	}
	api := kc.cs.CoreV1().Pods(kc.namespace)
	grace := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
	if uid != "" {
		u := types.UID(uid)
		opts.Preconditions = &metav1.Preconditions{UID: &u}
	}
	err := api.Delete(ctx, name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or a different pod of that name now
	}
	if err != nil {
		return classify("deleting the pod "+name, err)
	}
	w, err := api.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return classify("watching the pod "+name, err)
	}
	defer w.Stop()
	// The watch starts from "now": a pod deleted between Delete and Watch
	// gives no event, so look once.
	if _, err := api.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil
	}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				if _, err := api.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
					return nil
				}
				w.Stop()
				if w, err = api.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}); err != nil {
					return classify("watching the pod "+name, err)
				}
				continue
			}
			if ev.Type == watch.Deleted {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("the pod %s is still terminating: %w: %w", name, ctx.Err(), shared.ErrUnavailable)
		}
	}
}

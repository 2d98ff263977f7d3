package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/shared"
)

// A session pod of a sandbox with a network {} block (shared.EgressPolicy)
// reaches the outside through the egress proxy alone. The plugin serves
// one egress.Gateway on egress_listen, an address of its machine that the
// pods reach (on the test cluster the CNI bridge's gateway, 10.244.0.1);
// each session has a Route on it: a proxy of its own (policy, budget,
// connection slots, events naming the session) selected by a random
// credential that the pod's HTTP_PROXY and HTTPS_PROXY carry, and bound to
// the pod's IP. The pod's own NetworkPolicy (owned by the pod, so the
// garbage collector deletes it with the pod) allows egress to the
// gateway's IP and port and nothing else, DNS included; the namespace's
// deny-all policy covers the rest. One listener rather than one per
// session: every pod's policy names the same port, the plugin holds one
// socket however many sessions are open, and the credential (checked
// first) is what tells the sessions apart.

// LabelEgressRoute carries the id of a session pod's egress route (not
// its secret); the pod's NetworkPolicy selects the pod by it.
const LabelEgressRoute = "sandbox.orqest.org/egress-route"

// configureEgress parses the host's network block into cfg and checks
// egress_listen, which a block requires and which is refused without one.
func configureEgress(cfg *Config, p *shared.EgressPolicy) error {
	if p == nil {
		if cfg.EgressListen != "" {
			return shared.ConfigError("kubernetes", "egress_listen", nil, "%q without a network {} block: the sessions have no network, so there is no egress proxy to serve (leave egress_listen out, or add the block)", cfg.EgressListen)
		}
		return nil
	}
	if cfg.EgressListen == "" {
		return shared.ConfigError("kubernetes", "egress_listen", nil, "required with a network {} block: the IP:port on the plugin's machine where the session pods reach the egress proxy, e.g. \"10.244.0.1:0\" (the CNI bridge's gateway; port 0 picks one)")
	}
	ap, err := netip.ParseAddrPort(cfg.EgressListen)
	if err != nil {
		return shared.ConfigError("kubernetes", "egress_listen", nil, "%q: want IP:port such as \"10.244.0.1:0\" (%v)", cfg.EgressListen, err)
	}
	switch a := ap.Addr(); {
	case a.IsUnspecified():
		return shared.ConfigError("kubernetes", "egress_listen", nil, "%q: an unspecified address: the pods' NetworkPolicy names one IP, so listen on the one address they reach (e.g. the CNI bridge's gateway)", cfg.EgressListen)
	case a.IsLoopback():
		return shared.ConfigError("kubernetes", "egress_listen", nil, "%q: a loopback address, which no pod reaches", cfg.EgressListen)
	case a.IsMulticast() || a.Zone() != "":
		return shared.ConfigError("kubernetes", "egress_listen", nil, "%q: want a unicast address without a zone", cfg.EgressListen)
	}
	pol, err := egress.PolicyOf(p)
	if err != nil {
		return fmt.Errorf("kubernetes config: the network block: %w: %w", err, shared.ErrInvalidArgument)
	}
	cfg.egress = &pol
	return nil
}

// startGateway makes the backend's gateway serve cfg's egress_listen: the
// one already serving it stays (its sessions keep their routes), another
// is closed; without a network block none is left.
func (b *Backend) startGateway(cfg Config) error {
	b.mu.Lock()
	old, oldListen := b.gateway, b.gatewayListen
	b.mu.Unlock()
	if cfg.egress != nil && old != nil && oldListen == cfg.EgressListen {
		return nil
	}
	var gw *egress.Gateway
	if cfg.egress != nil {
		var err error
		gw, err = egress.ListenGateway(cfg.EgressListen, b.egressEvent, func(err error) { b.logger.Warn("egress gateway", "error", err) })
		if err != nil {
			return shared.ConfigError("kubernetes", "egress_listen", nil, "%q: %v (it must be an address of the plugin's machine that the pods reach)", cfg.EgressListen, err)
		}
	}
	b.mu.Lock()
	b.gateway, b.gatewayListen = gw, cfg.EgressListen
	b.mu.Unlock()
	if old != nil {
		if err := old.Close(); err != nil {
			b.logger.Warn("egress gateway: closing the previous one", "error", err)
		}
	}
	return nil
}

// stopGateway closes the gateway (Shutdown).
func (b *Backend) stopGateway() {
	b.mu.Lock()
	gw := b.gateway
	b.gateway, b.gatewayListen = nil, ""
	b.mu.Unlock()
	if gw != nil {
		if err := gw.Close(); err != nil {
			b.logger.Warn("egress gateway", "error", err)
		}
	}
}

// addRoute starts the egress route of a new session pod of user whose
// session label is label; nil without a network block.
func (b *Backend) addRoute(cfg Config, user, label string) (*egress.Route, error) {
	if cfg.egress == nil {
		return nil, nil
	}
	b.mu.Lock()
	gw := b.gateway
	b.mu.Unlock()
	if gw == nil {
		return nil, fmt.Errorf("open: the egress gateway is not serving: %w", shared.ErrFailedPrecondition)
	}
	r, err := gw.Add(egress.Options{Policy: *cfg.egress, Lookup: b.egressLookup, OnEvent: b.egressEvent})
	if err != nil {
		return nil, fmt.Errorf("open: %w: %w", err, shared.ErrUnavailable)
	}
	r.Proxy.SetSession(label, user)
	return r, nil
}

// withEgress points pod's runtime at route's proxy (egress.ProxyEnv) and
// labels the pod with the route's id for its NetworkPolicy. A nil route
// leaves pod as it is.
func withEgress(pod *corev1.Pod, route *egress.Route) {
	if route == nil {
		return
	}
	pod.Labels[LabelEgressRoute] = route.ID
	c := &pod.Spec.Containers[0]
	for _, kv := range egress.ProxyEnv(route.URL()) {
		k, v, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
	}
}

// egressPolicyName is the NetworkPolicy of the session pod podName.
func egressPolicyName(podName string) string { return podName + "-egress" }

// egressPolicy is the NetworkPolicy of the session pod pod (created: it
// has its name and uid) with egress route routeID: egress to the
// gateway's address proxy (one IP, one TCP port) and nothing else. It adds
// to the namespace's deny-all policy (policies are a union of what they
// allow), and the pod owns it, so it goes with the pod.
func egressPolicy(pod *corev1.Pod, routeID string, proxy netip.AddrPort) *networkingv1.NetworkPolicy {
	bits := 32
	if proxy.Addr().Is6() {
		bits = 128
	}
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(int32(proxy.Port()))
	yes := true
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:   egressPolicyName(pod.Name),
			Labels: map[string]string{LabelManagedBy: managedBy, LabelTier: tierValue, LabelEgressRoute: routeID},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelTier: tierValue, LabelEgressRoute: routeID}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: netip.PrefixFrom(proxy.Addr(), bits).String()}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}

// createEgressPolicy creates the NetworkPolicy of the session pod pod.
func (b *Backend) createEgressPolicy(ctx context.Context, kc *kubeClient, pod *corev1.Pod, route *egress.Route) error {
	np := egressPolicy(pod, route.ID, route.Addr())
	if _, err := kc.cs.NetworkingV1().NetworkPolicies(kc.namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		return classify("open: creating the pod's NetworkPolicy "+np.Name, err)
	}
	return nil
}

// bindSource binds the route to the running pod's IP, so that its
// credential works from that pod alone.
func bindSource(route *egress.Route, pod *corev1.Pod) error {
	if route == nil {
		return nil
	}
	a, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		return fmt.Errorf("open: the pod %s runs without an IP (%q) to bind its egress route to: %w", pod.Name, pod.Status.PodIP, shared.ErrUnavailable)
	}
	route.SetSource(a)
	return nil
}

// stopEgress ends the session's route (its credential is refused from now
// on, its tunnels are cut) and deletes the pod's NetworkPolicy (which the
// garbage collector would delete with the pod as well). Safe on an agent
// without egress.
func (s *agent) stopEgress(ctx context.Context, kc *kubeClient) error {
	if s.route == nil {
		return nil
	}
	errs := []error{s.route.Close()}
	if kc != nil && s.pod != "" {
		err := kc.cs.NetworkingV1().NetworkPolicies(kc.namespace).Delete(ctx, egressPolicyName(s.pod), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, classify("deleting the pod's NetworkPolicy", err))
		}
	}
	return errors.Join(errs...)
}

// egressEvent keeps a proxy event for the host (the next response's
// Events) and logs it.
func (b *Backend) egressEvent(ev egress.Event) {
	b.egressEvents.Keep(b.logger, ev)
}

// Execute runs req (session.Manager.Execute) and reports the egress
// events of every session since the last response.
func (b *Backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	return b.egressEvents.Respond(b.Manager.Execute(ctx, req))
}

// ExecuteStream is Execute with the output streamed (shared.Streamer).
func (b *Backend) ExecuteStream(ctx context.Context, req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecuteResponse, error) {
	return b.egressEvents.Respond(b.Manager.ExecuteStream(ctx, req, send))
}

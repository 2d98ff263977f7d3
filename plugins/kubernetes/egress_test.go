package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/orqest/sandbox/egress"
	"github.com/orqest/sandbox/shared"
)

// TestEgressConfig: egress_listen is required with a network block and
// refused without one, and one no pod could reach, or that the pods'
// NetworkPolicy could not name, is refused at the attribute before
// anything touches a cluster; a bad block is ErrInvalidArgument.
func TestEgressConfig(t *testing.T) {
	pol := &shared.EgressPolicy{Name: `sandbox "k" network {}`, Allow: []string{"api.example.com"}}
	cases := []struct {
		listen string
		pol    *shared.EgressPolicy
		want   string
	}{
		{"", pol, "required with a network {} block"},
		{"10.244.0.1:0", nil, "without a network {} block"},
		{"10.244.0.1", pol, "want IP:port"},
		{"proxy.local:3128", pol, "want IP:port"},
		{"0.0.0.0:0", pol, "an unspecified address"},
		{"[::]:3128", pol, "an unspecified address"},
		{"127.0.0.1:3128", pol, "a loopback address"},
		{"[fe80::1%eth0]:3128", pol, "without a zone"},
	}
	for _, c := range cases {
		raw, _ := json.Marshal(map[string]any{"egress_listen": c.listen})
		if c.listen == "" {
			raw = nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := NewBackend(nil).Configure(ctx, shared.ConfigureRequest{Config: raw, Egress: c.pol})
		cancel()
		var fe *shared.FieldError
		if !errors.As(err, &fe) || fe.Field != "egress_listen" || !errors.Is(err, shared.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("egress_listen %q (block %v): %v; want a FieldError on egress_listen saying %q", c.listen, c.pol != nil, err, c.want)
		}
	}
	bad := &shared.EgressPolicy{Name: "bad", Allow: []string{"http://x"}}
	cfg := defaultConfig()
	cfg.EgressListen = "10.244.0.1:0"
	if err := configureEgress(&cfg, bad); !errors.Is(err, shared.ErrInvalidArgument) {
		t.Errorf("a bad block: %v", err)
	}
	if err := configureEgress(&cfg, &shared.EgressPolicy{Name: "ok", Allow: []string{"api.example.com"}, MaxConnections: 3}); err != nil || cfg.egress == nil || cfg.egress.MaxConns != 3 {
		t.Errorf("a good block: %v %+v", err, cfg.egress)
	}
	info, err := NewBackend(nil).Info(context.Background(), shared.InfoRequest{})
	if err != nil || !info.Has(shared.CapEgress) {
		t.Errorf("Info: %v; egress capability %v", err, info.Has(shared.CapEgress))
	}
}

// TestEgressObjects: a pod without a network block has no proxy
// environment and no route label, so only the namespace's deny-all
// policy selects it; with one, the pod's HTTP_PROXY carries its route's
// credential and its own NetworkPolicy selects it alone and allows TCP to
// the gateway's one address and port, nothing else (no DNS), owned by the
// pod.
func TestEgressObjects(t *testing.T) {
	cfg := defaultConfig()
	o := owner{id: "o1", host: "h", pid: 1, start: "1"}
	plain := hardenedPod(cfg, o, "alice", "s1")
	if len(plain.Spec.Containers[0].Env) != 0 || plain.Labels[LabelEgressRoute] != "" {
		t.Errorf("a pod without a block: env %v labels %v", plain.Spec.Containers[0].Env, plain.Labels)
	}
	deny := denyAllPolicy()
	if len(deny.Spec.Egress) != 0 || len(deny.Spec.Ingress) != 0 || len(deny.Spec.PolicyTypes) != 2 {
		t.Errorf("deny-all policy allows something: %+v", deny.Spec)
	}

	g, err := egress.ListenGateway("127.0.0.1:0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	route, err := g.Add(egress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod := hardenedPod(cfg, o, "alice", "s1")
	withEgress(pod, route)
	env := map[string]string{}
	for _, e := range pod.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		if env[k] != route.URL() || !strings.Contains(env[k], route.ID+":") {
			t.Errorf("%s = %q, want the route's URL %q", k, env[k], route.URL())
		}
	}
	if v, ok := env["NO_PROXY"]; !ok || v != "" {
		t.Errorf("NO_PROXY = %q, %v; want it set empty", v, ok)
	}
	pod.Name, pod.UID = "orqest-sbx-abcde", types.UID("uid-1")
	proxy := netip.MustParseAddrPort("10.244.0.1:41234")
	np := egressPolicy(pod, route.ID, proxy)
	sel, err := labels.ValidatedSelectorFromSet(np.Spec.PodSelector.MatchLabels)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(pod.Labels)) || sel.Matches(labels.Set(plain.Labels)) {
		t.Errorf("the policy's selector %v: matches its pod %v, another pod %v", sel, sel.Matches(labels.Set(pod.Labels)), sel.Matches(labels.Set(plain.Labels)))
	}
	if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeEgress || len(np.Spec.Ingress) != 0 {
		t.Errorf("policy types %v, ingress %v: want egress only (ingress stays the deny-all's)", np.Spec.PolicyTypes, np.Spec.Ingress)
	}
	if len(np.Spec.Egress) != 1 {
		t.Fatalf("egress rules %+v, want one", np.Spec.Egress)
	}
	r := np.Spec.Egress[0]
	if len(r.To) != 1 || r.To[0].IPBlock == nil || r.To[0].IPBlock.CIDR != "10.244.0.1/32" || len(r.To[0].IPBlock.Except) != 0 || r.To[0].PodSelector != nil || r.To[0].NamespaceSelector != nil {
		t.Errorf("egress peers %+v, want 10.244.0.1/32 alone", r.To)
	}
	if len(r.Ports) != 1 || r.Ports[0].Protocol == nil || *r.Ports[0].Protocol != corev1.ProtocolTCP || r.Ports[0].Port == nil || r.Ports[0].Port.IntValue() != 41234 || r.Ports[0].EndPort != nil {
		t.Errorf("egress ports %+v, want TCP 41234 alone", r.Ports)
	}
	if len(np.OwnerReferences) != 1 || np.OwnerReferences[0].UID != pod.UID || np.OwnerReferences[0].Kind != "Pod" || np.Name != egressPolicyName(pod.Name) {
		t.Errorf("policy %s owners %+v", np.Name, np.OwnerReferences)
	}
	if np6 := egressPolicy(pod, route.ID, netip.MustParseAddrPort("[fd00::1]:3128")); np6.Spec.Egress[0].To[0].IPBlock.CIDR != "fd00::1/128" {
		t.Errorf("IPv6 gateway: %s", np6.Spec.Egress[0].To[0].IPBlock.CIDR)
	}
}

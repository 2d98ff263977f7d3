package kubernetes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/orqest/sandbox/shared"
)

// connect builds the cluster client of cfg: the kubeconfig file and
// context it names, else the in-cluster service account when the plugin
// runs in a pod, else $KUBECONFIG or ~/.kube/config.
func connect(cfg Config) (*kubeClient, error) {
	var rc *rest.Config
	ns := cfg.Namespace
	if cfg.Kubeconfig == "" && cfg.Context == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes config: in-cluster configuration: %w: %w", err, shared.ErrUnavailable)
		}
		rc = c
		if ns == "" {
			if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
				ns = strings.TrimSpace(string(b))
			}
		}
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if cfg.Kubeconfig != "" {
			if !filepath.IsAbs(cfg.Kubeconfig) {
				return nil, shared.ConfigError("kubernetes", "kubeconfig", nil, "%q: want an absolute path", cfg.Kubeconfig)
			}
			if _, err := os.Stat(cfg.Kubeconfig); err != nil {
				return nil, shared.ConfigError("kubernetes", "kubeconfig", nil, "%q: %v", cfg.Kubeconfig, err)
			}
			rules.ExplicitPath = cfg.Kubeconfig
		}
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: cfg.Context})
		c, err := cc.ClientConfig()
		if err != nil {
			field := "kubeconfig"
			if cfg.Context != "" {
				field = "context"
			}
			return nil, shared.ConfigError("kubernetes", field, nil, "no usable cluster configuration: %v", err)
		}
		rc = c
		if ns == "" {
			if n, _, err := cc.Namespace(); err == nil {
				ns = n
			}
		}
	}
	if ns == "" {
		ns = DefaultNamespace
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "orqest-sandbox-plugin-kubernetes/" + version
	// Opening sessions concurrently creates, watches and attaches to many
	// pods: client-go's default of 5 requests per second would queue them.
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: client: %v: %w", err, shared.ErrInvalidArgument)
	}
	return &kubeClient{rest: rc, cs: cs, namespace: ns}, nil
}

// permission is one thing the plugin's identity must be allowed to do in
// its namespace (the Role in docs/kubernetes.md grants them all).
type permission struct {
	group, resource, subresource, verb string
}

// requiredPermissions lists what sessions need; claims only with a storage
// class, creating and deleting NetworkPolicies only with a network block.
func requiredPermissions(cfg Config) []permission {
	p := []permission{
		{"", "pods", "", "create"},
		{"", "pods", "", "get"},
		{"", "pods", "", "list"},
		{"", "pods", "", "watch"},
		{"", "pods", "", "delete"},
		{"", "pods", "attach", "create"},
		{"", "pods", "attach", "get"},
		{"coordination.k8s.io", "leases", "", "create"},
		{"coordination.k8s.io", "leases", "", "get"},
		{"coordination.k8s.io", "leases", "", "update"},
		{"coordination.k8s.io", "leases", "", "delete"},
		{"networking.k8s.io", "networkpolicies", "", "get"},
	}
	if cfg.StorageClass != "" {
		p = append(p, permission{"", "persistentvolumeclaims", "", "get"}, permission{"", "persistentvolumeclaims", "", "create"})
	}
	if cfg.egress != nil { // each session pod's own NetworkPolicy (egress.go)
		p = append(p, permission{"networking.k8s.io", "networkpolicies", "", "create"}, permission{"networking.k8s.io", "networkpolicies", "", "delete"})
	}
	return p
}

// checkCluster checks that the API server answers, that the plugin's
// identity holds every permission sessions need in the namespace (one
// SelfSubjectAccessReview each, which any identity may make), and that the
// runtime and storage classes exist where the identity may read them
// (cluster-scoped objects a namespaced Role does not cover: unreadable,
// they are checked when a pod starts instead).
func checkCluster(ctx context.Context, kc *kubeClient, cfg Config) error {
	if _, err := kc.cs.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("kubernetes config: the API server at %s does not answer: %w: %w", kc.rest.Host, err, shared.ErrUnavailable)
	}
	var missing []string
	for _, p := range requiredPermissions(cfg) {
		r, err := kc.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: kc.namespace, Group: p.group, Resource: p.resource, Subresource: p.subresource, Verb: p.verb,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return classify("kubernetes config: checking permissions", err)
		}
		if !r.Status.Allowed {
			res := p.resource
			if p.subresource != "" {
				res += "/" + p.subresource
			}
			if p.group != "" {
				res += "." + p.group
			}
			missing = append(missing, p.verb+" "+res)
		}
	}
	// The NetworkPolicy is created when missing: that needs create too,
	// unless the operator made it.
	if _, err := kc.cs.NetworkingV1().NetworkPolicies(kc.namespace).Get(ctx, NetworkPolicyName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		r, err := kc.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: kc.namespace, Group: "networking.k8s.io", Resource: "networkpolicies", Verb: "create",
			}},
		}, metav1.CreateOptions{})
		if err == nil && !r.Status.Allowed {
			missing = append(missing, "create networkpolicies.networking.k8s.io (or create the NetworkPolicy "+NetworkPolicyName+" yourself)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kubernetes config: the plugin's identity may not, in namespace %q: %s (bind it to the Role in docs/kubernetes.md): %w", kc.namespace, strings.Join(missing, ", "), shared.ErrPermissionDenied)
	}
	if cfg.RuntimeClass != "" {
		_, err := kc.cs.NodeV1().RuntimeClasses().Get(ctx, cfg.RuntimeClass, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return shared.ConfigError("kubernetes", "runtime_class", nil, "the cluster has no RuntimeClass %q (kubectl get runtimeclass lists those it has)", cfg.RuntimeClass)
		}
	}
	if cfg.StorageClass != "" {
		_, err := kc.cs.StorageV1().StorageClasses().Get(ctx, cfg.StorageClass, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return shared.ConfigError("kubernetes", "storage_class", nil, "the cluster has no StorageClass %q (kubectl get storageclass lists those it has)", cfg.StorageClass)
		}
	}
	return nil
}

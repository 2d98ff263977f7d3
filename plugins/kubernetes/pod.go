package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/orqest/sandbox/shared"
)

// Labels every session pod carries. The reaper lists pods by LabelTier and
// deletes those whose owner (LabelOwner: a plugin process, alive while its
// Lease is renewed) is gone.
const (
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	LabelTier       = "sandbox.orqest.org/tier"
	LabelOwner      = "sandbox.orqest.org/owner"
	LabelOwnerHost  = "sandbox.orqest.org/owner-host"
	LabelOwnerPID   = "sandbox.orqest.org/owner-pid"
	LabelOwnerStart = "sandbox.orqest.org/owner-start"
	LabelUser       = "sandbox.orqest.org/user"
	LabelSession    = "sandbox.orqest.org/session"
	// AnnotationUser and AnnotationSession hold the exact ids (a label
	// value is at most 63 characters; an id may be 64).
	AnnotationUser    = "sandbox.orqest.org/user"
	AnnotationSession = "sandbox.orqest.org/session"

	managedBy = "orqest-sandbox"
	tierValue = "kubernetes"
	// ContainerName is the runtime's container in a session pod.
	ContainerName = "runtime"
	// NetworkPolicyName is the namespace's deny-all policy for session
	// pods (created by Configure when missing).
	NetworkPolicyName = "orqest-sandbox-deny-all"
)

// LibraryPath is where the runtime keeps the user's tool library: in a
// directory of its own on the /data volume, which the runtime creates
// (0700, its uid). The volume's root is not the runtime's to take: a
// provisioned volume or an emptyDir belongs to root with the pod's
// fsGroup, and the runtime has no CAP_CHOWN here (tier 2's runtime does).
const LibraryPath = "/data/library/orqest-tools.sqlite"

// LabelValue is id as a label value: itself when it is one, else a digest
// of it (ids may end in '-' or '_' and be 64 characters long; label values
// may not).
func LabelValue(id string) string {
	if len(id) <= 63 && labelValueRE.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256-" + hex.EncodeToString(sum[:20])
}

var (
	labelValueRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	dnsNameRE    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	unsafeNameRE = regexp.MustCompile(`[^a-z0-9-]+`)
)

func isDNSName(s string) bool { return len(s) <= 63 && dnsNameRE.MatchString(s) }

// ClaimName is the PersistentVolumeClaim of user's tool library: readable
// (the id lowercased, other characters dropped) and unique (a digest of
// the exact id, since "Alice" and "alice" are different users).
func ClaimName(user string) string {
	s := strings.Trim(unsafeNameRE.ReplaceAllString(strings.ToLower(user), "-"), "-")
	if len(s) > 30 {
		s = strings.Trim(s[:30], "-")
	}
	sum := sha256.Sum256([]byte(user))
	if s == "" {
		return "orqest-user-" + hex.EncodeToString(sum[:6])
	}
	return "orqest-user-" + s + "-" + hex.EncodeToString(sum[:6])
}

// podLabels are the labels of a pod of user whose session label is label.
func podLabels(o owner, user, label string) map[string]string {
	return map[string]string{
		LabelManagedBy:  managedBy,
		LabelTier:       tierValue,
		LabelOwner:      o.id,
		LabelOwnerHost:  LabelValue(o.host),
		LabelOwnerPID:   strconv.Itoa(o.pid),
		LabelOwnerStart: o.start,
		LabelUser:       LabelValue(user),
		LabelSession:    LabelValue(label),
	}
}

// hardenedPod returns the pod of a session: the runtime as a non-root uid
// with every capability dropped, no privilege escalation, a read-only
// root, seccomp RuntimeDefault, no service-account token, no service
// links, resource requests and limits, /workspace on a size-capped
// memory emptyDir and /data on the user's claim (or an emptyDir without a
// storage class). The pod meets the "restricted" Pod Security Standard.
// stdin is open and StdinOnce: when the plugin's attach stream ends (the
// plugin closed the session or died), the runtime's stdin closes and it
// exits, and the pod (restartPolicy Never) ends.
func hardenedPod(cfg Config, o owner, user, label string) *corev1.Pod {
	yes, no := true, false
	uid := cfg.RunAsUser
	grace := int64(2)
	seccomp := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	mem := resource.MustParse(strconv.Itoa(cfg.MemoryMB) + "Mi")
	workspace := resource.MustParse(strconv.Itoa(cfg.WorkspaceMB) + "Mi")
	fsGroupPolicy := corev1.FSGroupChangeOnRootMismatch
	args := append([]string{"-library", LibraryPath, "-library-own-dir"}, cfg.runtimeFlags().Args()...)
	data := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
	if cfg.StorageClass != "" {
		data = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ClaimName(user)}}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "orqest-sbx-",
			Labels:       podLabels(o, user, label),
			Annotations:  map[string]string{AnnotationUser: user, AnnotationSession: label},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			HostNetwork:                   false,
			HostPID:                       false,
			HostIPC:                       false,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:        &yes,
				RunAsUser:           &uid,
				RunAsGroup:          &uid,
				FSGroup:             &uid,
				FSGroupChangePolicy: &fsGroupPolicy,
				SeccompProfile:      seccomp,
			},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           cfg.Image,
				ImagePullPolicy: corev1.PullPolicy(cfg.ImagePullPolicy),
				Args:            args,
				Stdin:           true,
				StdinOnce:       true,
				TTY:             false,
				WorkingDir:      "/workspace",
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             &yes,
					RunAsUser:                &uid,
					RunAsGroup:               &uid,
					Privileged:               &no,
					AllowPrivilegeEscalation: &no,
					ReadOnlyRootFilesystem:   &yes,
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           seccomp,
				},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(cfg.CPURequest*1000), resource.DecimalSI),
						corev1.ResourceMemory: mem,
					},
					Limits: corev1.ResourceList{
						corev1.ResourceCPU:    *resource.NewMilliQuantity(int64(cfg.CPUs*1000), resource.DecimalSI),
						corev1.ResourceMemory: mem,
					},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: "/workspace"},
					{Name: "data", MountPath: "/data"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &workspace}}},
				{Name: "data", VolumeSource: data},
			},
		},
	}
	if cfg.RuntimeClass != "" {
		rc := cfg.RuntimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	return pod
}

// denyAllPolicy is the namespace's NetworkPolicy for session pods: it
// selects every pod the plugin creates and allows no ingress and no egress
// (MCP travels over attach, through the API server and the kubelet, not the
// pod network). A CNI that enforces NetworkPolicy is what makes it hold.
func denyAllPolicy() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name:   NetworkPolicyName,
			Labels: map[string]string{LabelManagedBy: managedBy, LabelTier: tierValue},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelTier: tierValue}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// ensureNetworkPolicy creates the deny-all NetworkPolicy when the
// namespace lacks it. One that exists is left as the operator made it.
func ensureNetworkPolicy(ctx context.Context, kc *kubeClient) error {
	api := kc.cs.NetworkingV1().NetworkPolicies(kc.namespace)
	if _, err := api.Get(ctx, NetworkPolicyName, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return classify("kubernetes config: reading NetworkPolicy "+NetworkPolicyName, err)
	}
	if _, err := api.Create(ctx, denyAllPolicy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return classify("kubernetes config: creating NetworkPolicy "+NetworkPolicyName, err)
	}
	return nil
}

// ensureClaim creates user's library claim when it does not exist yet.
// Claims are never deleted by the plugin: the library outlives sessions.
func ensureClaim(ctx context.Context, kc *kubeClient, cfg Config, user string) error {
	if cfg.StorageClass == "" {
		return nil
	}
	api := kc.cs.CoreV1().PersistentVolumeClaims(kc.namespace)
	name := ClaimName(user)
	if _, err := api.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return classify("open: reading the library claim "+name, err)
	}
	sc := cfg.StorageClass
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{LabelManagedBy: managedBy, LabelTier: tierValue, LabelUser: LabelValue(user)},
			Annotations: map[string]string{AnnotationUser: user},
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: cfg.librarySize}},
		},
	}
	if _, err := api.Create(ctx, pvc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return classify("open: creating the library claim "+name, err)
	}
	return nil
}

// classify wraps an API error in a shared error class.
func classify(what string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: %w: %w", what, err, shared.ErrNotFound)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: %v (grant the plugin's identity the Role in docs/kubernetes.md): %w", what, err, shared.ErrPermissionDenied)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return fmt.Errorf("%s: %w: %w", what, err, shared.ErrInvalidArgument)
	case ctxErr(err):
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, err, shared.ErrUnavailable)
}

func ctxErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

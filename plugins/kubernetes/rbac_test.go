package kubernetes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/orqest/sandbox/shared"
)

// applyRBAC creates the documented ServiceAccount, Role and RoleBinding
// (docs/kubernetes-rbac.yaml) in the test namespace, the binding's subject
// moved there too.
func applyRBAC(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "kubernetes-rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("docs/kubernetes-rbac.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(testNamespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(testNamespace).Create(ctx, o, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				_, err = cs.RbacV1().Roles(testNamespace).Update(ctx, o, metav1.UpdateOptions{})
			}
		case *rbacv1.RoleBinding:
			for i := range o.Subjects {
				o.Subjects[i].Namespace = testNamespace
			}
			_, err = cs.RbacV1().RoleBindings(testNamespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("docs/kubernetes-rbac.yaml: unexpected %T", obj)
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("applying %T: %v", obj, err)
		}
	}
}

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount sa of the test namespace (a bound token) and returns its
// path.
func serviceAccountKubeconfig(t *testing.T, cs kubernetes.Interface, sa string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(testNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	secs := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(testNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s: %v", sa, err)
	}
	admin, err := clientcmd.BuildConfigFromFlags("", testKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	ca := admin.CAData
	if len(ca) == 0 && admin.CAFile != "" {
		if ca, err = os.ReadFile(admin.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: ca}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["sa"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: sa, Namespace: testNamespace}
	kc.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRoleIsEnough runs the backend as a ServiceAccount bound to the
// documented Role only: Configure's permission check passes and a session
// (claim, pod, attach, lease, delete) works end to end. An identity
// without the Role is refused at Configure with ErrPermissionDenied naming
// what it lacks.
func TestRoleIsEnough(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	applyRBAC(t, cs)
	kubeconfig := serviceAccountKubeconfig(t, cs, "orqest-sandbox")
	b := newBackend(t, map[string]any{"kubeconfig": kubeconfig, "namespace": nil})
	if b.kc.namespace != testNamespace {
		t.Errorf("namespace from the kubeconfig context = %q, want %q", b.kc.namespace, testNamespace)
	}
	sid := openSession(t, b, user)
	res := execOK(t, b, shared.ExecuteRequest{Code: "return 'as the service account'", SessionID: sid})
	if !res.Success {
		t.Fatalf("execute: %+v", res)
	}
	closeSession(t, b, sid)

	none := serviceAccountKubeconfig(t, cs, "orqest-sandbox-unbound")
	nb := NewBackend(testLogger())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := nb.Configure(ctx, shared.ConfigureRequest{Config: testConfig(map[string]any{"kubeconfig": none})})
	if !errors.Is(err, shared.ErrPermissionDenied) || !strings.Contains(err.Error(), "create pods") || !strings.Contains(err.Error(), "create pods/attach") {
		t.Fatalf("Configure without the Role = %v; want ErrPermissionDenied naming create pods and pods/attach", err)
	}
	t.Logf("without the Role: %v", err)
}

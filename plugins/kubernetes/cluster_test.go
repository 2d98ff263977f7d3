package kubernetes

// Test plumbing against a real cluster: the single-node one that
// scripts/k8s/up.sh runs on this machine (`make k8s-up`), or any cluster
// ORQEST_KUBECONFIG names. Without one the tests skip loudly; with
// ORQEST_REQUIRE_K8S=1 (CI) they fail instead.
//
// The test identity is the cluster's admin (it creates the test namespace,
// the StorageClass and the volumes); the backend under test uses the same
// kubeconfig unless a test says otherwise (TestRoleIsEnough runs it as a
// ServiceAccount bound to the documented Role only).

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/orqest/sandbox/shared"
)

const (
	// testNamespace holds everything the tests create.
	testNamespace = "orqest-sandbox-test"
	// testStorageClass has no provisioner: the tests create each user's
	// volume themselves (a hostPath PersistentVolume pre-bound to the
	// user's claim), as an operator with static volumes would.
	testStorageClass = "orqest-test-static"
	// testRuntimeClass maps to containerd's runc handler: a RuntimeClass
	// that exists and works on the test cluster.
	testRuntimeClass = "orqest-test-runc"
	// defaultK8sRoot is where scripts/k8s/up.sh keeps its cluster.
	defaultK8sRoot = "/var/tmp/orqest-k8s"
)

func k8sRoot() string {
	if v := os.Getenv("K8S_ROOT"); v != "" {
		return v
	}
	return defaultK8sRoot
}

// testKubeconfig is the kubeconfig of the test cluster.
func testKubeconfig() string {
	if v := os.Getenv("ORQEST_KUBECONFIG"); v != "" {
		return v
	}
	return filepath.Join(k8sRoot(), "kubeconfig", "admin.kubeconfig")
}

// testImage is the runtime image the tests use (imported into the
// cluster's containerd by scripts/k8s/up.sh).
func testImage() string {
	if v := os.Getenv("ORQEST_K8S_IMAGE"); v != "" {
		return v
	}
	return DefaultImage()
}

// requireCluster returns an admin client of the test cluster, with the
// test namespace and its fixtures made, or skips loudly (fails with
// ORQEST_REQUIRE_K8S=1).
func requireCluster(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, reason := dialTestCluster()
	if reason != "" {
		if os.Getenv("ORQEST_REQUIRE_K8S") == "1" {
			t.Fatalf("ORQEST_REQUIRE_K8S=1 and %s", reason)
		}
		t.Skipf("SKIPPING Kubernetes test: %s (start the local cluster with `make k8s-up`, or set ORQEST_KUBECONFIG; ORQEST_REQUIRE_K8S=1 makes this a failure)", reason)
	}
	if err := ensureFixtures(cs); err != nil {
		t.Fatalf("test fixtures: %v", err)
	}
	return cs
}

func dialTestCluster() (kubernetes.Interface, string) {
	path := testKubeconfig()
	if _, err := os.Stat(path); err != nil {
		return nil, "no kubeconfig at " + path
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, "kubeconfig " + path + ": " + err.Error()
	}
	rc.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err.Error()
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		return nil, "API server of " + path + " unreachable: " + err.Error()
	}
	return cs, ""
}

// ensureFixtures makes the namespace, the StorageClass and the RuntimeClass
// the tests use (idempotent).
func ensureFixtures(cs kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace, Labels: map[string]string{
		// The pods meet the restricted Pod Security Standard: enforce it.
		"pod-security.kubernetes.io/enforce": "restricted",
	}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	bindLater := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimRetain
	_, err = cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: testStorageClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: &bindLater,
		ReclaimPolicy:     &reclaim,
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: testRuntimeClass}, Handler: "runc"}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// testConfig is the backend config of the tests, with extra merged in.
func testConfig(extra map[string]any) []byte {
	cfg := map[string]any{
		"kubeconfig":        testKubeconfig(),
		"namespace":         testNamespace,
		"image":             testImage(),
		"image_pull_policy": "IfNotPresent",
		"storage_class":     testStorageClass,
		"memory_mb":         256,
		"cpu_request":       0.05,
	}
	for k, v := range extra {
		if v == nil {
			delete(cfg, k)
		} else {
			cfg[k] = v
		}
	}
	b, _ := json.Marshal(cfg)
	return b
}

func testLogger() hclog.Logger {
	level := hclog.Warn
	if testing.Verbose() {
		level = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{Name: "kubernetes-test", Level: level, Output: os.Stderr})
}

// newBackend returns a configured backend that is shut down at the end of
// the test.
func newBackend(t testing.TB, extra map[string]any) *Backend {
	t.Helper()
	return newBackendWith(t, shared.ConfigureRequest{Config: testConfig(extra), Classes: true}, nil)
}

// newBackendWith is newBackend configured with req, after setup (nil:
// none) has seen the fresh backend.
func newBackendWith(t testing.TB, req shared.ConfigureRequest, setup func(*Backend)) *Backend {
	t.Helper()
	requireCluster(t)
	b := NewBackend(testLogger())
	if setup != nil {
		setup(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Configure(ctx, req); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		b.Shutdown(ctx)
	})
	return b
}

// testUser returns a fresh user with a volume for its library claim (a
// hostPath PersistentVolume pre-bound to ClaimName(user), on a directory
// of the node owned by the runtime's uid), and at the end of the test
// checks that no pod of the user is left and removes the claim, the
// volume and the directory.
func testUser(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	u := "orqtest-" + randomHex(5)
	provideVolume(t, cs, u)
	return u
}

// provideVolume gives user's claim a volume and removes both at the end.
func provideVolume(t testing.TB, cs kubernetes.Interface, user string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	claim := ClaimName(user)
	dir := filepath.Join(k8sRoot(), "volumes", claim)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("volume directory: %v", err)
	}
	if err := os.Chown(dir, DefaultRunAsUser, DefaultRunAsUser); err != nil {
		t.Fatalf("volume directory: %v", err)
	}
	hostPathType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "orqest-test-" + claim, Labels: map[string]string{"sandbox.orqest.org/test": "true"}},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              testStorageClass,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(DefaultLibrarySize)},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: testNamespace, Name: claim},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostPathType}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("PersistentVolume: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for _, p := range podsOf(t, cs, LabelUser+"="+LabelValue(user)) {
			t.Errorf("leftover pod %s of user %s", p, user)
			_ = cs.CoreV1().Pods(testNamespace).Delete(ctx, p, metav1.DeleteOptions{})
		}
		_ = cs.CoreV1().PersistentVolumeClaims(testNamespace).Delete(ctx, claim, metav1.DeleteOptions{})
		_ = cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
		// The claim's protection finalizer holds it while a pod uses it.
		for i := 0; i < 100; i++ {
			_, err1 := cs.CoreV1().PersistentVolumeClaims(testNamespace).Get(ctx, claim, metav1.GetOptions{})
			_, err2 := cs.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		os.RemoveAll(dir)
	})
}

// podsOf lists the test namespace's pod names matching a label selector.
func podsOf(t testing.TB, cs kubernetes.Interface, selector string) []string {
	t.Helper()
	sel, err := labels.Parse(selector)
	if err != nil {
		t.Fatalf("selector %q: %v", selector, err)
	}
	list, err := cs.CoreV1().Pods(testNamespace).List(context.Background(), metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		t.Fatalf("listing pods: %v", err)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	return names
}

// openSession opens a session of user and returns its id.
func openSession(t testing.TB, b *Backend, user string) string {
	t.Helper()
	sid := "s-" + randomHex(4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := b.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return sid
}

// openedSession is what the tests read of an open session: its pod and
// the MCP connection to its runtime.
type openedSession struct {
	pod    string
	mcp    *mcp.ClientSession
	secret []byte
}

// sessionOf returns the open session sid of b.
func sessionOf(t testing.TB, b *Backend, sid string) openedSession {
	t.Helper()
	a, err := b.Agent(sid)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := b.Target(context.Background(), sid)
	if err != nil {
		t.Fatal(err)
	}
	return openedSession{pod: a.(*agent).pod, mcp: tg.MCP, secret: tg.Secret}
}

func execOK(t testing.TB, b *Backend, req shared.ExecuteRequest) shared.ExecutionResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := b.Execute(ctx, req)
	if err != nil {
		t.Fatalf("Execute(%q): %v", req.Code, err)
	}
	return resp.Result
}

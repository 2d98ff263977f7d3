package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/orqest/sandbox/internal/rtclient/rtclienttest"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// execInPod runs cmd in the session pod's runtime container with the
// admin's credentials (pods/exec, which the plugin's Role does not grant)
// and returns stdout, stderr and whether it exited 0.
func execInPod(t *testing.T, pod string, cmd ...string) (string, string, bool) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", testKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	req := cs.CoreV1().RESTClient().Post().Namespace(testNamespace).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: ContainerName, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(rc, http.MethodGet, req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	return stdout.String(), stderr.String(), err == nil
}

// TestHardenedPod reads a session's pod back from the API server and
// checks every hardening field, then looks from inside the container: the
// runtime (PID 1) is uid 1000 without capabilities, no-new-privileges and
// seccomp-filtered, the root is read-only and no service-account token is
// mounted. The test namespace enforces the "restricted" Pod Security
// Standard, so admission alone proves the pod meets it.
func TestHardenedPod(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, map[string]any{"runtime_class": testRuntimeClass, "cpus": 0.5, "memory_mb": 300, "workspace_mb": 32})
	sid := openSession(t, b, user)
	s := sessionOf(t, b, sid)
	ctx := context.Background()
	pod, err := cs.CoreV1().Pods(testNamespace).Get(ctx, s.pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, testNamespace, metav1.GetOptions{})
	if err != nil || ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Fatalf("the test namespace does not enforce the restricted standard: %v %v", ns.Labels, err)
	}
	wantLabels := map[string]string{
		LabelManagedBy: "orqest-sandbox", LabelTier: "kubernetes", LabelOwner: b.owner.id,
		LabelOwnerPID: strconv.Itoa(os.Getpid()), LabelUser: user, LabelSession: sid,
	}
	for k, v := range wantLabels {
		if pod.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, pod.Labels[k], v)
		}
	}
	if pod.Annotations[AnnotationUser] != user || pod.Annotations[AnnotationSession] != sid {
		t.Errorf("annotations: %v", pod.Annotations)
	}
	sp := pod.Spec
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("pod spec: %s", what)
		}
	}
	check("automountServiceAccountToken false", sp.AutomountServiceAccountToken != nil && !*sp.AutomountServiceAccountToken)
	check("enableServiceLinks false", sp.EnableServiceLinks != nil && !*sp.EnableServiceLinks)
	check("restartPolicy Never", sp.RestartPolicy == corev1.RestartPolicyNever)
	check("runtimeClassName "+testRuntimeClass, sp.RuntimeClassName != nil && *sp.RuntimeClassName == testRuntimeClass)
	check("no host namespaces", !sp.HostNetwork && !sp.HostPID && !sp.HostIPC)
	psc := sp.SecurityContext
	check("pod runAsNonRoot", psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	check("pod seccomp RuntimeDefault", psc != nil && psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault)
	if len(sp.Containers) != 1 || len(sp.InitContainers) != 0 {
		t.Fatalf("containers: %d, init containers: %d", len(sp.Containers), len(sp.InitContainers))
	}
	c := sp.Containers[0]
	sc := c.SecurityContext
	check("container securityContext", sc != nil)
	check("allowPrivilegeEscalation false", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation)
	check("not privileged", sc.Privileged != nil && !*sc.Privileged)
	check("readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem)
	check("runAsNonRoot, uid 1000", sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && sc.RunAsUser != nil && *sc.RunAsUser == DefaultRunAsUser)
	check("capabilities drop ALL, add none", sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0)
	check("stdin, stdinOnce, no tty", c.Stdin && c.StdinOnce && !c.TTY)
	lim, req := c.Resources.Limits, c.Resources.Requests
	check("cpu limit 500m", lim.Cpu().MilliValue() == 500)
	check("memory limit 300Mi", lim.Memory().Value() == 300<<20)
	check("memory request 300Mi", req.Memory().Value() == 300<<20)
	check("cpu request 50m", req.Cpu().MilliValue() == 50)
	for _, v := range sp.Volumes {
		switch v.Name {
		case "workspace":
			check("workspace: emptyDir, medium Memory, 32Mi", v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory && v.EmptyDir.SizeLimit.Value() == 32<<20)
		case "data":
			check("data: the user's claim", v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == ClaimName(user))
		default:
			t.Errorf("unexpected volume %s (a service-account token?): %+v", v.Name, v.VolumeSource)
		}
	}

	status, _, ok := execInPod(t, s.pod, "cat", "/proc/1/status")
	if !ok {
		t.Fatalf("exec cat /proc/1/status failed")
	}
	fields := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	check("runtime uid 1000 (real, effective, saved, fs)", fields["Uid"] == "1000 1000 1000 1000")
	check("runtime has no capabilities", fields["CapEff"] == "0000000000000000" && fields["CapPrm"] == "0000000000000000" && fields["CapBnd"] == "0000000000000000")
	check("no_new_privs", fields["NoNewPrivs"] == "1")
	check("seccomp filter", fields["Seccomp"] == "2")
	if _, _, ok := execInPod(t, s.pod, "sh", "-c", "echo x > /probe"); ok {
		t.Error("the root filesystem is writable")
	}
	if out, _, ok := execInPod(t, s.pod, "ls", "/var/run/secrets/kubernetes.io"); ok {
		t.Errorf("a service-account token is mounted: %s", out)
	}

	np, err := cs.NetworkingV1().NetworkPolicies(testNamespace).Get(ctx, NetworkPolicyName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the deny-all NetworkPolicy: %v", err)
	}
	check("NetworkPolicy selects the session pods", np.Spec.PodSelector.MatchLabels[LabelTier] == tierValue)
	check("NetworkPolicy denies ingress and egress", len(np.Spec.Ingress) == 0 && len(np.Spec.Egress) == 0 && len(np.Spec.PolicyTypes) == 2)

	res := execOK(t, b, shared.ExecuteRequest{Code: "return 6*7", SessionID: sid, UserID: user})
	if !res.Success || string(res.Output) != "42" {
		t.Fatalf("execute: %+v", res)
	}
	// The runtime and its children share uid 1000 here (no second uid
	// under the restricted standard): the seal of each child must hold.
	info := runtimeInfo(t, b, sid)
	t.Logf("sealing in force: %v; not enforced: %v", info.Sealing, info.SealingMissing)
	for _, layer := range []string{"no_new_privs", "landlock_fs", "seccomp"} {
		if !slices.Contains(info.Sealing, layer) {
			t.Errorf("sealing layer %s not in force in the pod: %v", layer, info.SealingMissing[layer])
		}
	}
	closeSession(t, b, sid)
	if _, err := cs.CoreV1().Pods(testNamespace).Get(ctx, s.pod, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pod is still there after Close: %v", err)
	}
}

// runtimeInfo calls the runtime's operator tool runtime_info.
func runtimeInfo(t *testing.T, b *Backend, sid string) rtproto.InfoResult {
	t.Helper()
	ctx := context.Background()
	tok, err := b.MintToken(ctx, shared.MintTokenRequest{SessionID: sid, Scope: shared.ScopeOperator, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.CallTool(ctx, shared.CallToolRequest{SessionID: sid, Tool: rtproto.ToolInfo, Token: tok.Token})
	if err != nil {
		t.Fatalf("runtime_info: %v", err)
	}
	var info rtproto.InfoResult
	if err := json.Unmarshal(r.Result, &info); err != nil {
		t.Fatalf("runtime_info: %v: %s", err, r.Result)
	}
	return info
}

// TestUserCodeCannotReadTheLibrary: code with pathlib allowed (so the
// validator lets a file read through) still cannot read the tool library
// on /data nor write outside its workspace: Landlock in the child holds
// although the child shares the runtime's uid. Reading the stdlib works.
func TestUserCodeCannotReadTheLibrary(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, nil)
	sid := openSession(t, b, user)
	run := func(code string) shared.ExecutionResult {
		return execOK(t, b, shared.ExecuteRequest{Code: code, AllowedImports: []string{"pathlib"}, SessionID: sid})
	}
	if res := run("import pathlib\nreturn pathlib.Path('/usr/lib/python3.11/json/decoder.py').read_text()[:9]"); !res.Success {
		t.Fatalf("benign: reading the stdlib failed: %+v", res)
	}
	// The library exists (the runtime opened it at session start).
	for _, attack := range []string{
		"import pathlib\nreturn pathlib.Path('/data/library/orqest-tools.sqlite').read_bytes()[:16].hex()",
		"import pathlib\nreturn [p.name for p in pathlib.Path('/data').iterdir()]",
		"import pathlib\npathlib.Path('/data/library/x').write_text('owned')\nreturn 1",
	} {
		res := run(attack)
		if res.Success {
			t.Errorf("user code reached /data: %q returned %s", attack, res.Output)
			continue
		}
		if !strings.Contains(res.Error, "PermissionError") && !strings.Contains(res.Error, "Permission denied") {
			t.Errorf("%q failed, but not on a permission: %s", attack, res.Error)
		}
	}
}

func closeSession(t testing.TB, b *Backend, sid string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.Close(ctx, shared.CloseRequest{SessionID: sid}); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestForgedTokens: the runtime in a pod refuses forged, expired and
// mis-scoped tokens and honours the agent/operator scopes, as in tier 2.
func TestForgedTokens(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, nil)
	sid := openSession(t, b, user)
	s := sessionOf(t, b, sid)
	rtclienttest.ForgedTokens(t, s.mcp, s.secret, user, sid)
}

// TestPodKilledMidCall: a pod deleted (grace 0) while a call runs is an
// infrastructure error (ErrUnavailable), the session is gone, and no pod
// is left.
func TestPodKilledMidCall(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, nil)
	sid := openSession(t, b, user)
	pod := sessionOf(t, b, sid).pod
	errc := make(chan error, 1)
	started := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := b.ExecuteStream(context.Background(), shared.ExecuteRequest{Code: "print('spinning', flush=True)\nwhile True:\n    pass", Timeout: 30 * time.Second, SessionID: sid},
			func(shared.OutputChunk) error { once.Do(func() { close(started) }); return nil })
		errc <- err
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("the call ended before the pod was deleted: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the call printed nothing within 30 s")
	}
	zero := int64(0)
	if err := cs.CoreV1().Pods(testNamespace).Delete(context.Background(), pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("deleting the pod: %v", err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, shared.ErrUnavailable) {
			t.Fatalf("Execute after the pod was deleted = %v, want ErrUnavailable", err)
		}
		t.Logf("infrastructure error as expected: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Execute did not return after the pod was deleted")
	}
	// The session keeps its id: the next call runs in a fresh pod.
	res, err := b.Execute(context.Background(), shared.ExecuteRequest{Code: "return 1", SessionID: sid})
	if err != nil || !res.Result.Success || !res.Result.StateLost {
		t.Fatalf("Execute on the session after its pod's death = %+v, %v; want success with state_lost", res.Result, err)
	}
	if now := sessionOf(t, b, sid).pod; now == pod {
		t.Errorf("the session is still served by the deleted pod %s", pod)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := cs.CoreV1().Pods(testNamespace).Get(context.Background(), pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted pod %s is still there after 30 s (%v)", pod, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitNoPods waits until no pod matches selector.
func waitNoPods(t testing.TB, cs kubernetes.Interface, selector string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := podsOf(t, cs, selector)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods still there after %v: %v", d, left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestSessionlessExecute: a call without a session runs in a pod of its
// own that is deleted when the call returns.
func TestSessionlessExecute(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, nil)
	res := execOK(t, b, shared.ExecuteRequest{Code: "return 6*7", UserID: user})
	if !res.Success || string(res.Output) != "42" {
		t.Fatalf("sessionless: %+v", res)
	}
	if left := podsOf(t, cs, LabelUser+"="+user); len(left) > 0 {
		t.Errorf("pods left after a sessionless call: %v", left)
	}
}

// TestOwnerKilledIsReaped SIGKILLs a process holding an open session: the
// attach stream closes, the runtime's stdin with it, and the runtime exits
// at once (the pod stops running); the next backend's Configure reaps the
// pod (its owner's pid is gone) and the owner's Lease.
func TestOwnerKilledIsReaped(t *testing.T) {
	if os.Getenv("ORQEST_K8S_CRASH_HELPER") == "1" {
		return // the helper runs in TestCrashHelper
	}
	cs := requireCluster(t)
	user := testUser(t, cs)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), "ORQEST_K8S_CRASH_HELPER=1", "ORQEST_CRASH_USER="+user)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got string
	deadline := time.Now().Add(120 * time.Second)
	for !strings.Contains(got, "SESSION-OPEN") && time.Now().Before(deadline) {
		n, err := out.Read(buf)
		got += string(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(got, "SESSION-OPEN") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper did not open a session: %q", got)
	}
	pods := podsOf(t, cs, LabelUser+"="+user)
	if len(pods) != 1 {
		t.Fatalf("helper's pods: %v, want 1", pods)
	}
	_ = cmd.Process.Kill() // SIGKILL: no Close, no Shutdown
	_ = cmd.Wait()
	start := time.Now()
	for {
		p, err := cs.CoreV1().Pods(testNamespace).Get(context.Background(), pods[0], metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the pod: %v", err)
		}
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			t.Logf("the runtime exited %v after its owner was SIGKILLed (pod %s)", time.Since(start).Round(time.Millisecond), p.Status.Phase)
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the runtime still runs 30s after its owner was SIGKILLed: %s", p.Status.Phase)
		}
		time.Sleep(100 * time.Millisecond)
	}
	newBackend(t, nil) // Configure reaps
	waitNoPods(t, cs, LabelUser+"="+user, 30*time.Second)
	dead := podOwner(t, got)
	if dead == "" {
		t.Fatalf("the helper printed no owner id: %q", got)
	}
	if _, err := cs.CoordinationV1().Leases(testNamespace).Get(context.Background(), LeasePrefix+dead, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dead owner's lease is still there: %v", err)
	}
}

// podOwner is the owner id the helper printed ("OWNER=<id>").
func podOwner(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "OWNER="); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestCrashHelper is the process TestOwnerKilledIsReaped kills.
func TestCrashHelper(t *testing.T) {
	if os.Getenv("ORQEST_K8S_CRASH_HELPER") != "1" {
		t.Skip("helper process for TestOwnerKilledIsReaped")
	}
	b := NewBackend(nil)
	ctx := context.Background()
	if _, err := b.Configure(ctx, shared.ConfigureRequest{Config: testConfig(nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(ctx, shared.OpenRequest{UserID: os.Getenv("ORQEST_CRASH_USER"), SessionID: "crash"}); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("OWNER=" + b.owner.id + "\nSESSION-OPEN\n")
	time.Sleep(5 * time.Minute)
}

// TestReaperUsesLeases: pods of an owner on another machine are deleted
// when its Lease is stale, kept while it is fresh.
func TestReaperUsesLeases(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, nil)
	ctx := context.Background()
	mk := func(renewed time.Time) (owner, string) {
		o := owner{id: randomHex(8), host: "elsewhere.example", pid: 1, start: "1"}
		holder, secs := "elsewhere.example/1", int32(30)
		rt := metav1.NewMicroTime(renewed)
		if _, err := cs.CoordinationV1().Leases(testNamespace).Create(ctx, leaseObject(o, holder, secs, rt), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := hardenedPod(b.config(), o, user, "foreign")
		p.Spec.Volumes[1].VolumeSource = corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
		created, err := cs.CoreV1().Pods(testNamespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cs.CoreV1().Pods(testNamespace).Delete(context.Background(), created.Name, metav1.DeleteOptions{})
			_ = cs.CoordinationV1().Leases(testNamespace).Delete(context.Background(), LeasePrefix+o.id, metav1.DeleteOptions{})
		})
		return o, created.Name
	}
	staleOwner, stale := mk(time.Now().Add(-5 * time.Minute))
	_, fresh := mk(time.Now())
	n, err := b.Reap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n < 1 {
		t.Errorf("Reap deleted %d pods, want >= 1", n)
	}
	if p, err := cs.CoreV1().Pods(testNamespace).Get(ctx, stale, metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
		t.Errorf("the pod of the stale owner is still there")
	}
	if _, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, LeasePrefix+staleOwner.id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stale owner's lease is still there: %v", err)
	}
	if p, err := cs.CoreV1().Pods(testNamespace).Get(ctx, fresh, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Errorf("the pod of the live owner was deleted: %v", err)
	}
	// The fresh one goes now, so the user's leftover check passes.
	zero := int64(0)
	_ = cs.CoreV1().Pods(testNamespace).Delete(ctx, fresh, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	waitNoPods(t, cs, LabelUser+"="+user, 30*time.Second)
}

package kubernetes

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/toollib"
)

const libAdd = "return args['a'] + args['b']"

func runTool(t *testing.T, b *Backend, sid, tool string) shared.ExecuteResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := b.Execute(ctx, shared.ExecuteRequest{Code: libAdd, Args: json.RawMessage(`{"a":1,"b":2}`), SessionID: sid, ToolName: tool})
	if err != nil || !resp.Result.Success {
		t.Fatalf("%s: %+v %v", tool, resp.Result, err)
	}
	return resp
}

func sessionTools(t *testing.T, b *Backend, sid string) []string {
	t.Helper()
	res, err := sessionOf(t, b, sid).mcp.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// TestLibraryOnTheUsersClaim: a tool promoted in one session is in the
// first tools/list of the user's next session, a new pod on the same
// claim, and is callable by name there; another user never sees it. The
// claim outlives the pods.
func TestLibraryOnTheUsersClaim(t *testing.T) {
	cs := requireCluster(t)
	alice, bob := testUser(t, cs), testUser(t, cs)
	b := newBackend(t, map[string]any{"promotion": map[string]any{"policy": "eager"}})
	sid := openSession(t, b, alice)
	if evs := runTool(t, b, sid, "add").Events; len(evs) != 1 || evs[0].Type != toollib.EventPromoted {
		t.Fatalf("eager promotion: %+v", evs)
	}
	closeSession(t, b, sid)
	claim, err := cs.CoreV1().PersistentVolumeClaims(testNamespace).Get(context.Background(), ClaimName(alice), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("alice's claim after Close: %v", err)
	}
	if claim.Annotations[AnnotationUser] != alice || *claim.Spec.StorageClassName != testStorageClass {
		t.Errorf("claim: %+v", claim.ObjectMeta)
	}

	sid2 := openSession(t, b, alice)
	defer closeSession(t, b, sid2)
	if names := sessionTools(t, b, sid2); !slices.Contains(names, "add") {
		t.Fatalf("alice's next session does not list add: %v", names)
	}
	tok, err := b.MintToken(context.Background(), shared.MintTokenRequest{SessionID: sid2, Scope: shared.ScopeAgent, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.CallTool(context.Background(), shared.CallToolRequest{SessionID: sid2, Tool: "add", Arguments: json.RawMessage(`{"a":40,"b":2}`), Token: tok.Token})
	if err != nil || !strings.Contains(string(r.Result), `"output":42`) {
		t.Fatalf("the replayed tool: %s %v", r.Result, err)
	}
	sidB := openSession(t, b, bob)
	defer closeSession(t, b, sidB)
	if slices.Contains(sessionTools(t, b, sidB), "add") {
		t.Fatal("bob sees alice's tool")
	}
}

// TestLibraryWithoutStorageClass: without a storage class the library is
// an emptyDir of the pod: it works within the session and is gone with it
// (the documented fallback).
func TestLibraryWithoutStorageClass(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, map[string]any{"storage_class": nil, "promotion": map[string]any{"policy": "eager"}})
	sid := openSession(t, b, user)
	pod, err := cs.CoreV1().Pods(testNamespace).Get(context.Background(), sessionOf(t, b, sid).pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == "data" && v.EmptyDir == nil {
			t.Errorf("data volume without a storage class: %+v", v.VolumeSource)
		}
	}
	runTool(t, b, sid, "add")
	if !slices.Contains(sessionTools(t, b, sid), "add") {
		t.Fatal("promoted tool not listed in its session")
	}
	closeSession(t, b, sid)
	sid2 := openSession(t, b, user)
	defer closeSession(t, b, sid2)
	if slices.Contains(sessionTools(t, b, sid2), "add") {
		t.Fatal("the emptyDir library outlived its pod")
	}
}

// TestWarmPool: after a user's first session opens, a warm pod of that
// user waits; the user's next Open binds it (same pod) and a new warm pod
// follows; Shutdown deletes the warm pod.
func TestWarmPool(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, map[string]any{"pool": map[string]any{"size": 2, "max_idle": "2m"}})
	sid := openSession(t, b, user)
	warm := waitWarm(t, b, cs, user)
	start := time.Now()
	sid2 := openSession(t, b, user)
	fromPool := time.Since(start)
	if got := sessionOf(t, b, sid2).pod; got != warm {
		t.Fatalf("second session's pod = %s, want the warm pod %s", got, warm)
	}
	res := execOK(t, b, shared.ExecuteRequest{Code: "return 'warm'", SessionID: sid2})
	if !res.Success {
		t.Fatalf("%+v", res)
	}
	t.Logf("Open from the pool: %v", fromPool.Round(time.Millisecond))
	next := waitWarm(t, b, cs, user)
	if next == warm {
		t.Fatal("no new warm pod")
	}
	closeSession(t, b, sid)
	closeSession(t, b, sid2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b.Shutdown(ctx)
	waitNoPods(t, cs, LabelUser+"="+user, 30*time.Second)
}

// waitWarm waits until user's warm pod is ready and returns its name: the
// user's pod that no open session has.
func waitWarm(t *testing.T, b *Backend, cs kubernetes.Interface, user string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if b.Warming() > 0 {
			used := map[string]bool{}
			for _, in := range b.Sessions() {
				if a, err := b.Agent(in.ID); err == nil {
					used[a.(*agent).pod] = true
				}
			}
			for _, p := range podsOf(t, cs, LabelUser+"="+user) {
				if !used[p] {
					return p
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no warm pod within 90s")
	return ""
}

// TestWorkspaceFiles: files put into a session's workspace are read by
// the code and come back; the workspace is the pod's memory emptyDir.
func TestWorkspaceFiles(t *testing.T) {
	cs := requireCluster(t)
	user := testUser(t, cs)
	b := newBackend(t, nil)
	sid := openSession(t, b, user)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "in/data.csv", Data: []byte("a,b\n1,2\n")}); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if _, err := b.PutFile(ctx, shared.PutFileRequest{SessionID: sid, Path: "../escape", Data: []byte("x")}); err == nil {
		t.Fatal("PutFile accepted ../escape")
	}
	got, err := b.GetFile(ctx, shared.GetFileRequest{SessionID: sid, Path: "in/data.csv"})
	if err != nil || string(got.Data) != "a,b\n1,2\n" {
		t.Fatalf("GetFile: %q %v", got.Data, err)
	}
	list, err := b.ListFiles(ctx, shared.ListFilesRequest{SessionID: sid, Path: "in"})
	if err != nil || len(list.Files) != 1 {
		t.Fatalf("ListFiles: %+v %v", list, err)
	}
}

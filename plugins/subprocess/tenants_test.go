package subprocess

import (
	"testing"

	"github.com/orqest/sandbox/shared"
)

// TestTenantsDoNotShareWarmBodies: a body one user's calls warmed (its
// source, with an API key in it, sits in the zygote's accepted-body cache
// and so in every child forked after) is readable from that user's later
// children, and from no other user's, nor from calls naming no user. The
// scan runs with the Python layers bypassed: it is what code that escaped
// them would do.
func TestTenantsDoNotShareWarmBodies(t *testing.T) {
	for _, mode := range []struct{ name, cfg string }{
		{"forkserver-c", `{"mode":"forkserver"}`},
		{"forkserver-python", `{"mode":"forkserver","forkcore":"none"}`},
	} {
		t.Run(mode.name, func(t *testing.T) {
			b := newTestBackend(t)
			configure(t, b, mode.cfg)
			if mode.name == "forkserver-c" {
				requireCore(t, b)
			}
			b.test = bypassValidation()
			body := "key = 'sk-live-tenant-a-4242'\nreturn len(key)"
			// Every dict reachable from the runner's module globals, and every
			// one the garbage collector tracks.
			scan := `import gc, sys, builtins
set, id = builtins.set, builtins.id
needle = "".join(["sk-live-", "tenant-a-", "4242"])
todo = [sys.modules["__main__"].__dict__] + [o for o in gc.get_objects() if isinstance(o, (dict, list))]
seen = set()
while todo:
    o = todo.pop()
    if id(o) in seen:
        continue
    seen.add(id(o))
    if isinstance(o, str):
        if needle in o:
            return True
    elif isinstance(o, dict):
        todo.extend(o.keys())
        todo.extend(o.values())
    elif isinstance(o, (list, tuple)):
        todo.extend(o)
return False`
			run := func(user, code string) string {
				t.Helper()
				res := execute(t, b, shared.ExecuteRequest{Code: code, UserID: user, AllowedImports: []string{"gc", "sys", "builtins"}})
				if !res.Success {
					t.Fatalf("user %q: %s: %s", user, res.ErrorKind, res.Error)
				}
				return string(res.Output)
			}
			for i := 0; i < 3; i++ { // accepted twice: the zygote warms it
				run("alice", body)
			}
			// The control: alice's own children come to hold it (children
			// pre-forked before the warm do not), so the scan can see it.
			seen := false
			for i := 0; i < 3*forkServerPool && !seen; i++ {
				seen = run("alice", scan) == "true"
			}
			if !seen {
				t.Fatal("control: alice's warmed body never showed in her children; the scan proves nothing")
			}
			for _, user := range []string{"bob", ""} {
				for i := 0; i < 3*forkServerPool; i++ {
					if run(user, scan) == "true" {
						t.Fatalf("run %d as user %q read alice's body from its zygote", i, user)
					}
				}
			}
			if a, o := b.zygotes.Peek("alice"), b.zygotes.Peek("bob"); a == nil || o == nil || a == o {
				t.Errorf("alice and bob do not have zygotes of their own (%p, %p)", a, o)
			}
		})
	}
}

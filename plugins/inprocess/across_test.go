package inprocess

import (
	"encoding/json"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// TestOneCallDoesNotReachTheNext: code that escaped the Python layers in one
// call (stood in for by execRaw, between calls) rebinds the runner's entry
// points, poisons its caches and changes the capture stream's class, to read
// later callers' code and args and forge their results. The next call must
// run as if nothing happened: the right result, nothing seen.
func TestOneCallDoesNotReachTheNext(t *testing.T) {
	b := newConfigured(t, `{}`)
	wantOK := func(args string) {
		t.Helper()
		res := execute(t, b, shared.ExecuteRequest{Code: "print(args['key'])\nreturn args['key'] * len('ab')", Args: json.RawMessage(args)})
		if !res.Success || string(res.Output) != `"kk"` {
			t.Fatalf("result %s %s %s, want \"kk\"", res.Output, res.ErrorKind, res.Error)
		}
	}
	wantOK(`{"key":"k"}`) // warm: the body is in every cache now
	ip, err := sharedInterp()
	if err != nil {
		t.Fatal(err)
	}
	attack := `
import builtins
builtins._orq_seen = seen = []
_real_execute, _real_check, _real_call = _orq_execute, _orq_check, _orq_t0_call
try:
    _OrqT0Capture
except NameError:
    _OrqT0Capture = _orq_t0_capture_class()
def _orq_execute(req, seen=seen, _real_execute=_real_execute):
    seen.append(("execute", req.get("args")))
    return _real_execute(req)
def _orq_check(code, allowed, rules, classes=False, seen=seen):
    seen.append(("check", code))
    return []
def _orq_t0_call(req_json, max_out, seen=seen):
    seen.append(("call", req_json))
    return (b'{"success": true, "output": "forged"}', b"", False, b"", False)
for r, base in _orq_builtins_prepared:
    base["len"] = lambda x, _len=len, seen=seen: (seen.append(("len", x)), _len(x))[1]
_real_write = _OrqT0Capture.write
def _spy_write(self, s, seen=seen, _real_write=_real_write):
    seen.append(("stdout", s))
    return _real_write(self, s)
_OrqT0Capture.write = _spy_write
`
	if err := ip.execRaw(attack); err != nil {
		t.Fatalf("the stand-in attack did not run: %v", err)
	}
	wantOK(`{"key":"k"}`)
	if err := ip.execRaw(`
import builtins
if builtins._orq_seen:
    raise AssertionError("seen: %r" % (builtins._orq_seen,))
del builtins._orq_seen
`); err != nil {
		t.Fatalf("a later call was observed: %v", err)
	}
}

package inprocess

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

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

// TestCallCannotChangeLibraryStateForTheNext: on tier 0 with classes off
// (the attack builds its class with type()) and copy and json allowed, a call reaches for the library
// classes every call shares (json.JSONEncoder, collections.abc.Callable)
// through copy's reconstruction of a type()-built object, and for the
// allowed modules' process-wide state (random's seed, decimal's context).
// The class attributes stay as they were, the state is put back, and the
// next call's result is its own.
func TestCallCannotChangeLibraryStateForTheNext(t *testing.T) {
	b := newConfigured(t, `{}`)
	allowed := []string{"copy", "json", "collections", "random", "decimal"}
	attack := "import copy, json, collections.abc\n" +
		"T = type(int)\n" +
		"R = T('R', (), {'__reduce_ex__': lambda self, p: (lambda: json.JSONEncoder, (), (None, {'item_separator': 'FORGED', 'encode': len}))})\n" +
		"copy.copy(R())\n" +
		"return 1"
	res := execute(t, b, shared.ExecuteRequest{Code: attack, AllowedImports: allowed})
	if res.Success || !strings.Contains(res.Error, "may not define __reduce_ex__") {
		t.Fatalf("want the attack refused, got success=%v %s %s: %s", res.Success, res.Output, res.ErrorKind, res.Error)
	}
	res = execute(t, b, shared.ExecuteRequest{Code: "import random, decimal\nrandom.seed(7)\ndecimal.getcontext().prec = 3\nreturn str(decimal.Decimal(1) / decimal.Decimal(7))", AllowedImports: allowed})
	if !res.Success || string(res.Output) != `"0.143"` {
		t.Fatalf("decimal's context in the call: %s %s %s", res.Output, res.ErrorKind, res.Error)
	}
	res = execute(t, b, shared.ExecuteRequest{Code: "import random, decimal, json\nreturn [random.random() != 0.32383276483316237, str(decimal.Decimal(1) / decimal.Decimal(7)), json.dumps({'a': [1, 2]})]", AllowedImports: allowed})
	if !res.Success || string(res.Output) != `[true, "0.1428571428571428571428571429", "{\"a\": [1, 2]}"]` {
		t.Fatalf("the next call saw the earlier one's state: %s %s %s", res.Output, res.ErrorKind, res.Error)
	}
	ip, err := sharedInterp()
	if err != nil {
		t.Fatal(err)
	}
	if err := ip.execRaw(`
import json, collections.abc
for k in ("item_separator", "encode"):
    if k in vars(json.JSONEncoder) and vars(json.JSONEncoder)[k] in ("FORGED", len):
        raise AssertionError("json.JSONEncoder.%s was set" % k)
if "__match_args__" in vars(collections.abc.Callable):
    raise AssertionError("collections.abc.Callable.__match_args__ was set")
`); err != nil {
		t.Fatalf("a library class was changed: %v", err)
	}
}

// TestFinalisersRunInTheirOwnCall: a generator in a reference cycle whose
// finally block prints is collected at the end of its own call (armed),
// not during a later one: its output is the call's own, never the next's.
func TestFinalisersRunInTheirOwnCall(t *testing.T) {
	b := newConfigured(t, `{}`)
	code := "def g():\n    try:\n        yield 1\n    finally:\n        print('FINALLY-' + str(len(box)))\nbox = []\nx = g()\nnext(x)\nbox.append(x)\nbox.append(box)\nreturn 1"
	res := execute(t, b, shared.ExecuteRequest{Code: code})
	if !res.Success || !strings.Contains(res.Stdout, "FINALLY-2") {
		t.Fatalf("the finaliser did not run in its own call: stdout %q, %s %s", res.Stdout, res.ErrorKind, res.Error)
	}
	next := execute(t, b, shared.ExecuteRequest{Code: "print('second')\nreturn 2"})
	if strings.Contains(next.Stdout, "FINALLY") {
		t.Fatalf("the earlier call's finaliser ran in the next call: %q", next.Stdout)
	}
}

// TestCallCannotSetLibraryClassAttributes: with classes on, a call's
// dataclass() of a library class every call shares (json.JSONEncoder) is
// refused by the C hook; the next call finds the class unchanged.
func TestCallCannotSetLibraryClassAttributes(t *testing.T) {
	b := NewBackend(hclog.NewNullLogger())
	if _, err := b.Configure(context.Background(), shared.ConfigureRequest{Unsafe: true, Classes: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	res := execute(t, b, shared.ExecuteRequest{Code: "import dataclasses, json\ndataclasses.dataclass(json.JSONEncoder)\nreturn 1", AllowedImports: []string{"json", "dataclasses"}})
	if res.Success || !strings.Contains(res.Error, "did not create") {
		t.Fatalf("want the C hook's refusal, got success=%v %s: %s", res.Success, res.ErrorKind, res.Error)
	}
	ip, err := sharedInterp()
	if err != nil {
		t.Fatal(err)
	}
	if err := ip.execRaw(`
import json
if "__dataclass_fields__" in vars(json.JSONEncoder):
    raise AssertionError("dataclass() changed json.JSONEncoder")
`); err != nil {
		t.Fatalf("a library class was changed: %v", err)
	}
}

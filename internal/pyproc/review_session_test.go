package pyproc_test

// Payloads of an attack review of stateful sessions (one interpreter, one
// globals dict, call after call), with the C hook when ORQEST_FORKCORE
// names it.

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestReviewSessionExceptionStrRaisesBaseException: an exception whose
// __str__ raises a BaseException escaped the runner's handlers and ended
// the session's interpreter (its state lost, no response). Now the call
// is a runtime error and the state stays.
func TestReviewSessionExceptionStrRaisesBaseException(t *testing.T) {
	nb := startNotebook(t, true)
	j := cell("x = 5")
	j.Request.Classes = true
	runCell(t, nb, j)
	j = cell("class Bye(BaseException):\n    def __str__(self):\n        raise Bye()\nclass E(Exception):\n    def __str__(self):\n        raise Bye()\nraise E()")
	j.Request.Classes = true
	res := runCell(t, nb, j)
	if res.Success || res.ErrorKind != "runtime" || !strings.Contains(res.Error, "<exception str() failed>") {
		t.Fatalf("want a runtime error, got %+v", res)
	}
	if res := runCell(t, nb, cell("return x")); string(res.Output) != "5" {
		t.Fatalf("the state after the call: %+v", res)
	}
}

// TestReviewSessionLeftoversRunArmed: what a call leaves for later calls —
// a suspended generator whose finally block builds a metaclass and a class
// with __reduce_ex__ (what the hook's class guard refuses), a library
// class built by a cached_property callback with the code's __del__, and
// unflushed output — runs armed when a later call frees it: the guard
// refuses, and the later call's stdout holds only its own text.
func TestReviewSessionLeftoversRunArmed(t *testing.T) {
	forkCore(t)
	nb := startNotebook(t, true)
	j := cell("import functools\nlog = []\ndef g():\n    try:\n        yield 1\n    finally:\n        for f in (lambda: type(int)('M', (type(int),), {}), lambda: type(int)('R', (), {'__reduce_ex__': len})):\n            try:\n                f()\n                log.append('built')\n            except TypeError as e:\n                log.append('refused')\n"+
		"gen = g()\nnext(gen)\nclass D(dict):\n    m = functools.cached_property(functools.partial(type(int), 'K', ()))\n"+
		"try:\n    k = D({'__del__': lambda self: log.append('del')}).m()\nexcept TypeError:\n    log.append('del refused')\nprint('left', end='')\nreturn 1", "functools")
	j.Request.Classes = true
	if res := runCell(t, nb, j); !res.Success {
		t.Fatalf("call 1: %+v", res)
	}
	res := runCell(t, nb, cell("del gen\nprint('two')\nreturn log"))
	var log []string
	if !res.Success || json.Unmarshal(res.Output, &log) != nil {
		t.Fatalf("call 2: %+v", res)
	}
	if strings.Join(log, ",") != "del refused,refused,refused" {
		t.Fatalf("want every leftover refused by the class guard, got %v", log)
	}
	if res.Stdout != "two\n" {
		t.Fatalf("call 2's stdout holds another call's output: %q", res.Stdout)
	}
}

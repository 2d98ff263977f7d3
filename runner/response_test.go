package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/orqest/sandbox/shared"
)

func TestParseResponseAcceptsWhatTheRunnerWrites(t *testing.T) {
	for _, c := range []struct{ in, kind, out string }{
		{`{"success": true, "output": {"a": [1, 2.5, "x", null, true]}}`, "", `{"a": [1, 2.5, "x", null, true]}`},
		{`{"success": true}`, "", `null`},
		{`{"success": true, "output": "\ud800 lone"}`, "", `"\ud800 lone"`},
		{`{"success": false, "error": "ZeroDivisionError", "error_kind": "runtime"}`, "runtime", ``},
		{`{"success": false, "error": "x", "error_kind": "validation", "findings": [{"rule": "forbidden-builtin", "message": "m", "line": 1, "column": 2, "snippet": "eval"}]}`, "validation", ``},
		{`{"success": false, "error": "runner failed", "error_kind": "internal"}`, "internal", ``},
		{`{"success": true, "output": ` + strings.Repeat("[", MaxOutputDepth) + strings.Repeat("]", MaxOutputDepth) + `}`, "", strings.Repeat("[", MaxOutputDepth) + strings.Repeat("]", MaxOutputDepth)},
	} {
		r, err := ParseResponse([]byte(c.in))
		if err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if r.ErrorKind != c.kind || string(r.Output) != c.out {
			t.Errorf("%s: kind %q output %s, want %q %s", c.in, r.ErrorKind, r.Output, c.kind, c.out)
		}
	}
}

// A child that escaped the Python layers can write anything to fd 3: what
// breaks the protocol is refused (an infrastructure error), never trusted.
func TestParseResponseRefusesForgedResponses(t *testing.T) {
	for _, in := range []string{
		``,
		`[]`,
		`{"success": true`,
		`{"success": "yes"}`,
		`{"output": 1}`,
		`{"success": true, "success": false}`,
		`{"success": false, "error_kind": "runtime", "error_kind": "validation"}`,
		`{"success": true, "output": 1, "extra": 2}`,
		`{"success": true, "output": 1} {"success": true}`,
		`{"success": true, "error_kind": "runtime"}`,
		`{"success": false, "error_kind": "timeout", "error": "forged"}`,
		`{"success": false, "error_kind": "killed"}`,
		`{"success": false, "error_kind": "nonsense"}`,
		`{"success": false, "error_kind": "runtime", "output": 3}`,
		`{"success": false, "error_kind": "runtime", "findings": [{"rule": "forbidden-builtin"}]}`,
		`{"success": false, "error_kind": "validation", "findings": [{"rule": "invented-rule", "message": "m"}]}`,
		`{"success": false, "error_kind": "validation", "findings": [{"rule": "forbidden-builtin", "bogus": 1}]}`,
		`{"success": false, "error_kind": "validation", "findings": [{"rule": "forbidden-builtin", "line": -1}]}`,
		"{\"success\": true, \"output\": \"\xff\"}",
		`{"success": true, "output": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
	} {
		if r, err := ParseResponse([]byte(in)); !errors.Is(err, ErrProtocol) {
			t.Errorf("%.80q: got %+v, %v; want ErrProtocol", in, r, err)
		}
	}
}

// A result no client should be handed is the user's value at fault:
// not_serializable, whatever else the response says.
func TestParseResponseUnservableOutput(t *testing.T) {
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	for _, out := range []string{
		deep,
		strings.Repeat("[", MaxOutputDepth+1) + strings.Repeat("]", MaxOutputDepth+1),
		`1e999999`,
		`[-1e400]`,
		`{"a": 1, "a": 2}`,
		`[{"k": {"x": 1, "x": 1}}]`,
	} {
		r, err := ParseResponse([]byte(`{"success": true, "output": ` + out + `}`))
		if err != nil {
			t.Errorf("%.40s: %v", out, err)
			continue
		}
		if r.Success || r.ErrorKind != string(shared.KindNotSerializable) || r.Output != nil {
			t.Errorf("%.40s: got %+v, want not_serializable without output", out, r)
		}
	}
}

// FuzzParseResponse: whatever a child writes to fd 3, ParseResponse
// returns an error wrapping ErrProtocol or a response the runner could
// have written: a successful one with valid, servable JSON output and no
// error, or a failed one with a kind a child reports, findings only for a
// validation error; encoded again, it parses to the same response, and
// Apply turns it into a result (or, for an internal error, an error
// wrapping shared.ErrInternal).
func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{
		`{"success": true, "output": [1, {"a": 2}]}`,
		`{"success": false, "error_kind": "validation", "findings": []}`,
		`{"success": true, "output": 1e999}`,
		`{"success": true, "output": {"a": [1, 2.5, "x", null, true]}}`,
		`{"success": true}`,
		`{"success": true, "output": "\ud800 lone"}`,
		`{"success": false, "error": "ZeroDivisionError", "error_kind": "runtime"}`,
		`{"success": false, "error": "x", "error_kind": "validation", "findings": [{"rule": "forbidden-builtin", "message": "m", "line": 1, "column": 2, "snippet": "eval"}]}`,
		`{"success": false, "error": "runner failed", "error_kind": "internal"}`,
		`{"success": false, "error": "m", "error_kind": "memory"}`,
		`{"success": false, "error": "", "error_kind": "invalid_args", "output": null}`,
		`{"success": true, "output": {"a": 1, "a": 2}}`,
		`{"success": true, "success": false}`,
		`{"success": false, "error_kind": "timeout", "error": "forged"}`,
		`{"success": true, "output": 1, "extra": 2}`,
		`{"success": true, "output": 1} {"success": true}`,
		"{\"success\": true, \"output\": \"\xff\"}",
		` {"output": -0.0e-0, "success": true} `,
		`{"success": true, "output": ` + strings.Repeat("[", MaxOutputDepth) + strings.Repeat("]", MaxOutputDepth) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResponse(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v does not wrap ErrProtocol", err)
			}
			return
		}
		if r.Success && (r.ErrorKind != "" || r.Error != "" || r.Findings != nil) {
			t.Fatalf("success with kind %q error %q findings %v", r.ErrorKind, r.Error, r.Findings)
		}
		if !r.Success && !childKinds[shared.ErrorKind(r.ErrorKind)] {
			t.Fatalf("kind %q accepted", r.ErrorKind)
		}
		if !r.Success && (r.Output != nil || (r.Findings != nil && r.ErrorKind != string(shared.KindValidation))) {
			t.Fatalf("failure with output %s findings %v", r.Output, r.Findings)
		}
		if r.Success {
			if !json.Valid(r.Output) {
				t.Fatalf("accepted output is not JSON: %q", r.Output)
			}
			if why := checkOutput(r.Output); why != "" {
				t.Fatalf("accepted output fails its own check: %s", why)
			}
		}
		enc, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", r, err)
		}
		r2, err := ParseResponse(enc)
		if err != nil {
			t.Fatalf("re-encoded %s: %v", enc, err)
		}
		if enc2, _ := json.Marshal(r2); !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoded and parsed again: %s, want %s", enc2, enc)
		}
		var res shared.ExecutionResult
		err = r.Apply(&res)
		switch {
		case r.ErrorKind == KindInternal:
			if !errors.Is(err, shared.ErrInternal) {
				t.Fatalf("an internal error applied: %v", err)
			}
		case err != nil:
			t.Fatalf("Apply: %v", err)
		case res.Success != r.Success || (!res.Success && res.ErrorKind == shared.KindNone) || len(res.Error) > MaxErrorBytes:
			t.Fatalf("applied %+v from %+v", res, r)
		}
	})
}

package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

// testCase is one case of the suite.
type testCase struct {
	name string
	// needs lists the capabilities the backend must declare; otherwise the
	// case is skipped with a message naming the missing one.
	needs []shared.Capability
	// unconfigured: the harness does not send Configure (nor Open).
	unconfigured bool
	// noSession: the harness does not open a session even WithSession.
	noSession bool
	run       func(t *testing.T, h *harness)
}

// allCases is the suite, in order. Keep the package doc and CaseNames'
// users (WithSkip) in mind when renaming.
var allCases = []testCase{
	{name: "Info", unconfigured: true, run: caseInfo},
	{name: "ReturnValue", run: caseReturnValue},
	{name: "Args", run: caseArgs},
	{name: "AllowedImport", run: caseAllowedImport},
	{name: "DeniedImport", run: caseDeniedImport},
	{name: "ForeignVerdict", run: caseForeignVerdict},
	{name: "ForbiddenBuiltin", run: caseForbiddenBuiltin},
	{name: "SyntaxError", run: caseSyntaxError},
	{name: "ValidateBenign", run: caseValidateBenign},
	{name: "Classes", run: caseClasses},
	{name: "RuntimeError", run: caseRuntimeError},
	{name: "NotSerializable", run: caseNotSerializable},
	{name: "Stdout", run: caseStdout},
	{name: "StdoutTruncated", needs: []shared.Capability{shared.CapOutputLimit}, run: caseStdoutTruncated},
	{name: "OutputLimit", needs: []shared.Capability{shared.CapOutputLimit}, run: caseOutputLimit},
	{name: "TimeoutCPULoop", needs: []shared.Capability{shared.CapWallClockTimeout}, run: caseTimeoutCPULoop},
	{name: "TimeoutSleep", needs: []shared.Capability{shared.CapWallClockTimeout}, run: caseTimeoutSleep},
	{name: "MemoryLimit", needs: []shared.Capability{shared.CapMemoryLimit}, run: caseMemoryLimit},
	{name: "Cancel", needs: []shared.Capability{shared.CapWallClockTimeout}, run: caseCancel},
	{name: "InvalidArgs", run: caseInvalidArgs},
	{name: "OversizeCode", run: caseOversizeCode},
	{name: "LimitsEchoed", run: caseLimitsEchoed},
	{name: "Duration", run: caseDuration},
	{name: "Concurrent", run: caseConcurrent},
	{name: "Streaming", needs: []shared.Capability{shared.CapStreaming}, run: caseStreaming},
	{name: "Sessions", noSession: true, run: caseSessions},
	{name: "AgentDeath", noSession: true, needs: []shared.Capability{shared.CapSessions, shared.CapStreaming}, run: caseAgentDeath},
	{name: "Pause", noSession: true, needs: []shared.Capability{shared.CapSessions, shared.CapStreaming}, run: casePause},
	{name: "UnsafeOptIn", unconfigured: true, run: caseUnsafeOptIn},
}

// caseInfo: name, tier, API versions and config schema are sane, and in the
// gRPC mode Info survives the wire unchanged.
func caseInfo(t *testing.T, h *harness) {
	i := h.info
	if strings.TrimSpace(i.Name) == "" {
		t.Error("Info.Name is empty")
	}
	if i.Tier < 0 || i.Tier > 3 {
		t.Errorf("Info.Tier = %d, want 0..3", i.Tier)
	}
	if strings.TrimSpace(i.Version) == "" {
		t.Error("Info.Version is empty")
	}
	speaks := false
	for _, v := range i.APIVersions {
		if v == shared.APIVersion {
			speaks = true
		}
	}
	if !speaks {
		t.Errorf("Info.APIVersions = %v, want it to contain shared.APIVersion (%d)", i.APIVersions, shared.APIVersion)
	}
	checkSchema(t, "ConfigSchema", i.ConfigSchema)
	if h.mode != ModeGRPC {
		return
	}
	direct, err := h.impl.Info(h.ctx(t), shared.InfoRequest{})
	if err != nil {
		t.Fatalf("Info on the implementation: %v", err)
	}
	if direct.Name != i.Name || direct.Tier != i.Tier || direct.Version != i.Version || direct.Description != i.Description {
		t.Errorf("Info over gRPC = {%q tier %d %q %q}, in-process = {%q tier %d %q %q}",
			i.Name, i.Tier, i.Version, i.Description, direct.Name, direct.Tier, direct.Version, direct.Description)
	}
	if fmt.Sprint(direct.APIVersions) != fmt.Sprint(i.APIVersions) {
		t.Errorf("APIVersions over gRPC = %v, in-process = %v", i.APIVersions, direct.APIVersions)
	}
	if !reflect.DeepEqual(sortedCaps(direct.Capabilities), sortedCaps(i.Capabilities)) {
		t.Errorf("Capabilities over gRPC = %v, in-process = %v", i.Capabilities, direct.Capabilities)
	}
	if len(direct.ConfigSchema) != len(i.ConfigSchema) ||
		(len(i.ConfigSchema) > 0 && !reflect.DeepEqual(direct.ConfigSchema, i.ConfigSchema)) {
		t.Errorf("ConfigSchema over gRPC = %+v, in-process = %+v", i.ConfigSchema, direct.ConfigSchema)
	}
}

// caseReturnValue: every JSON type comes back as the JSON the code returned.
func caseReturnValue(t *testing.T, h *harness) {
	for _, tc := range []struct{ name, code, want string }{
		{"int", "return 42", "42"},
		{"negative_bigint", "return -2**70", "-1180591620717411303424"},
		{"float", "return 1.5", "1.5"},
		{"float_repr", "return 0.1 + 0.2", "0.30000000000000004"},
		{"str_unicode", "return 'héllo, 世界 ✓ \\U0001F600'", `"héllo, 世界 ✓ 😀"`},
		{"str_escapes", `return 'a"b\\c\nd\te'`, `"a\"b\\c\nd\te"`},
		{"list", "return [1, 'two', 3.5, None, True]", `[1, "two", 3.5, null, true]`},
		{"tuple_is_list", "return (1, 2)", "[1, 2]"},
		{"dict", "return {'a': 1, 'nested': {'b': [1, 2]}, 'ü': 'x'}", `{"a": 1, "nested": {"b": [1, 2]}, "ü": "x"}`},
		{"empty_list", "return []", "[]"},
		{"empty_dict", "return {}", "{}"},
		{"none_is_null", "return None", "null"},
		{"implicit_none", "x = 1", "null"},
		{"true", "return True", "true"},
		{"false", "return False", "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.execute(t, shared.ExecuteRequest{Code: tc.code})
			expectSuccess(t, tc.code, res, tc.want)
		})
	}
}

// caseArgs: args arrive as the JSON object that was sent.
func caseArgs(t *testing.T, h *harness) {
	t.Run("sum", func(t *testing.T) {
		code := "return args['x'] + args['y']"
		res := h.execute(t, shared.ExecuteRequest{Code: code, Args: json.RawMessage(`{"x": 2, "y": 3}`)})
		expectSuccess(t, code, res, "5")
	})
	t.Run("roundtrip", func(t *testing.T) {
		args := `{"s": "ünï ✓", "n": [1, 2.5, null, -7], "b": false, "o": {"k": "v"}}`
		res := h.execute(t, shared.ExecuteRequest{Code: "return args", Args: json.RawMessage(args)})
		expectSuccess(t, "return args", res, args)
	})
	t.Run("empty_means_object", func(t *testing.T) {
		res := h.execute(t, shared.ExecuteRequest{Code: "return args"})
		expectSuccess(t, "return args", res, "{}")
	})
}

// caseAllowedImport: a module in allowed_imports can be imported and used.
func caseAllowedImport(t *testing.T, h *harness) {
	allow := []string{"math"}
	for _, tc := range []struct{ name, code, want string }{
		{"import", "import math\nreturn math.sqrt(16)", "4"},
		{"from_import", "from math import sqrt\nreturn sqrt(9)", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f := h.validate(t, tc.code, allow); len(f) != 0 {
				t.Errorf("Validate(%s, allow %v) rejected it: %v", quote(tc.code), allow, f)
			}
			res := h.execute(t, shared.ExecuteRequest{Code: tc.code, AllowedImports: allow})
			expectSuccess(t, tc.code, res, tc.want)
		})
	}
}

// rejectBoth checks that Validate reports findings for code and that Execute,
// called without a prior Validate, rejects it with error_kind validation and
// runs nothing.
func rejectBoth(t *testing.T, h *harness, code string, allow []string, line int) {
	t.Helper()
	expectFindings(t, "Validate", code, h.validate(t, code, allow), line)
	// The print runs first if the backend executes before validating.
	probe := "print('ran')\n" + code
	res := h.execute(t, shared.ExecuteRequest{Code: probe, AllowedImports: allow})
	expectFailure(t, probe, res, shared.KindValidation)
	if len(res.Findings) == 0 {
		t.Errorf("Execute(%s): rejected by validation but the result carries no findings", quote(probe))
	}
	if strings.Contains(res.Stdout, "ran") {
		t.Errorf("Execute(%s): the code ran before validation rejected it (stdout %q)", quote(probe), res.Stdout)
	}
}

// caseDeniedImport: default-deny imports, by Validate and inside Execute.
func caseDeniedImport(t *testing.T, h *harness) {
	for _, tc := range []struct {
		name, code string
		allow      []string
		line       int
	}{
		{"import", "import os\nreturn 1", nil, 1},
		{"from_import", "from os import path\nreturn 1", nil, 1},
		{"dotted", "import os.path\nreturn 1", nil, 1},
		{"not_in_allowlist", "import math\nimport subprocess\nreturn 1", []string{"math"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) { rejectBoth(t, h, tc.code, tc.allow, tc.line) })
	}
}

// caseForeignVerdict: a verdict (shared.ExecuteRequest.Verdict) that is
// not the backend's own for the request, whether for another body or
// naming another rules version or options, does not let a bad body
// through: Execute validates and refuses it, and nothing runs.
func caseForeignVerdict(t *testing.T, h *harness) {
	bad := "print('ran')\nimport os\nreturn 1"
	for name, v := range map[string]*shared.Verdict{
		"another_body":              {CodeSHA256: sha256.Sum256([]byte("return 1")), Rules: "another", Options: "another"},
		"another_rules_and_options": {CodeSHA256: sha256.Sum256([]byte(bad)), Rules: strings.Repeat("0", 64), Options: strings.Repeat("0", 64)},
	} {
		t.Run(name, func(t *testing.T) {
			res := h.execute(t, shared.ExecuteRequest{Code: bad, Verdict: v})
			expectFailure(t, bad, res, shared.KindValidation)
			if strings.Contains(res.Stdout, "ran") {
				t.Errorf("Execute(%s) with a foreign verdict ran the code (stdout %q)", quote(bad), res.Stdout)
			}
		})
	}
}

// caseForbiddenBuiltin: forbidden builtins, reflection helpers and dunder
// access are rejected, by Validate and inside Execute.
func caseForbiddenBuiltin(t *testing.T, h *harness) {
	for _, tc := range []struct{ name, code string }{
		{"eval", "return eval('1')"},
		{"exec_reference", "f = exec\nreturn 1"},
		{"open", "return open('/etc/passwd').read()"},
		{"getattr_dunder", "return getattr(args, '__class__')"},
		{"dunder_attribute", "return ().__class__.__bases__"},
		{"dunder_import", "return __import__('os')"},
	} {
		t.Run(tc.name, func(t *testing.T) { rejectBoth(t, h, tc.code, nil, 1) })
	}
	// A name computed at run time passes the static checks; the guarded
	// getattr refuses it when the call runs.
	t.Run("getattr_computed", func(t *testing.T) {
		code := "return str(getattr(args, ''.join(['__cla', 'ss__'])))"
		res := h.execute(t, shared.ExecuteRequest{Code: code})
		if res.Success {
			t.Errorf("Execute(%s) succeeded (%s): a computed dunder name reached getattr", quote(code), res.Output)
		}
	})
}

// caseSyntaxError: code that does not parse is a validation rejection.
func caseSyntaxError(t *testing.T, h *harness) {
	rejectBoth(t, h, "x = 1\nreturn (", nil, 0)
}

// caseValidateBenign: code an LLM typically writes is accepted and runs.
func caseValidateBenign(t *testing.T, h *harness) {
	for _, tc := range []struct{ name, code, want string }{
		{"idioms", `def square(n):
    return n * n
nums = [square(i) for i in range(5)]
evens = {i: i % 2 == 0 for i in nums}
key = lambda kv: -kv[0]
try:
    ratio = 10 / len(nums)
except ZeroDivisionError:
    ratio = 0
if (total := sum(nums)) > 10:
    label = f"total={total:d} ratio={ratio:.1f}"
else:
    label = "small"
return {'label': label, 'top': sorted(evens.items(), key=key)[0][0]}`, `{"label": "total=30 ratio=2.0", "top": 16}`},
		{"match_and_hints", `def describe(x: int) -> str:
    match x:
        case 0:
            return "zero"
        case _:
            return "many"
return [describe(0), describe(5)]`, `["zero", "many"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f := h.validate(t, tc.code, nil); len(f) != 0 {
				t.Errorf("Validate rejected benign code: %v\ncode:\n%s", f, tc.code)
			}
			res := h.execute(t, shared.ExecuteRequest{Code: tc.code})
			expectSuccess(t, tc.code, res, tc.want)
		})
	}
}

// caseClasses: a backend that declares the classes capability runs class
// statements (a custom exception, methods, properties, super()), encodes a
// result of a dict subclass without calling its methods, and still refuses
// attribute writes to objects the body did not make; one that does not
// declare it rejects class statements in Validate and Execute.
func caseClasses(t *testing.T, h *harness) {
	if !h.info.Has(shared.CapClasses) {
		t.Run("refused", func(t *testing.T) { rejectBoth(t, h, "class A:\n    pass\nreturn 1", nil, 1) })
		return
	}
	for _, tc := range []struct{ name, code, want string }{
		{"custom_exception", `class ToolError(Exception):
    def __init__(self, msg, code=1):
        super().__init__(msg)
        self.code = code
try:
    raise ToolError('bad input', 2)
except ToolError as e:
    return [str(e), e.code, type(e).__name__]`, `["bad input", 2, "ToolError"]`},
		{"methods", `class Stack:
    def __init__(self):
        self.items = []
    def __len__(self):
        return len(self.items)
    @property
    def top(self):
        return self.items[-1]
    def push(self, x):
        self.items.append(x)
        return self
return [len(Stack().push(1).push(2)), Stack().push(3).top]`, `[2, 3]`},
		{"dict_subclass_result", `class D(dict):
    def items(self):
        raise RuntimeError('ran user code while encoding')
return D(a=1)`, `{"a": 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f := h.validate(t, tc.code, nil); len(f) != 0 {
				t.Errorf("Validate rejected class code: %v\ncode:\n%s", f, tc.code)
			}
			res := h.execute(t, shared.ExecuteRequest{Code: tc.code})
			expectSuccess(t, tc.code, res, tc.want)
		})
	}
	t.Run("metaclass_refused", func(t *testing.T) { rejectBoth(t, h, "class A(metaclass=type):\n    pass\nreturn 1", nil, 1) })
	t.Run("foreign_write_refused", func(t *testing.T) {
		code := "import json\nE = json.JSONEncoder\nE.encode = len\nreturn 1"
		res := h.execute(t, shared.ExecuteRequest{Code: code, AllowedImports: []string{"json"}})
		expectFailure(t, code, res, shared.KindRuntime)
		if !strings.Contains(res.Error, "cannot set or delete attributes") {
			t.Errorf("want the write guard's message, got %q", res.Error)
		}
	})
}

// caseRuntimeError: an exception is error_kind runtime with traceback text
// naming the exception and the user's line; stdout printed before it is kept.
func caseRuntimeError(t *testing.T, h *harness) {
	t.Run("zero_division", func(t *testing.T) {
		code := "print('before')\nx = 1\nreturn x / 0"
		res := h.execute(t, shared.ExecuteRequest{Code: code})
		expectFailure(t, code, res, shared.KindRuntime)
		if !strings.Contains(res.Error, "ZeroDivisionError") {
			t.Errorf("error does not name ZeroDivisionError: %q", res.Error)
		}
		if !strings.Contains(res.Error, "line 3") {
			t.Errorf("error does not point at the user's line 3 (traceback text): %q", res.Error)
		}
		if res.Stdout != "before\n" {
			t.Errorf("stdout printed before the exception = %q, want %q", res.Stdout, "before\n")
		}
	})
	t.Run("raise", func(t *testing.T) {
		code := "raise ValueError('boom')"
		res := h.execute(t, shared.ExecuteRequest{Code: code})
		expectFailure(t, code, res, shared.KindRuntime)
		if !strings.Contains(res.Error, "ValueError") || !strings.Contains(res.Error, "boom") {
			t.Errorf("error does not carry the exception type and message: %q", res.Error)
		}
	})
	t.Run("key_error", func(t *testing.T) {
		code := "return args['missing']"
		res := h.execute(t, shared.ExecuteRequest{Code: code, Args: json.RawMessage(`{"present": 1}`)})
		expectFailure(t, code, res, shared.KindRuntime)
		if !strings.Contains(res.Error, "KeyError") {
			t.Errorf("error does not name KeyError: %q", res.Error)
		}
	})
}

// caseNotSerializable: a result JSON cannot represent is not_serializable.
func caseNotSerializable(t *testing.T, h *harness) {
	for _, tc := range []struct{ name, code string }{
		{"set", "return {1, 2}"},
		{"nan", "return float('nan')"},
		{"function", "return lambda: 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.execute(t, shared.ExecuteRequest{Code: tc.code})
			expectFailure(t, tc.code, res, shared.KindNotSerializable)
		})
	}
}

// caseStdout: print output is captured, separately from the result.
func caseStdout(t *testing.T, h *harness) {
	code := "print('hi')\nprint('ü', 2)\nreturn 1"
	res := h.execute(t, shared.ExecuteRequest{Code: code})
	expectSuccess(t, code, res, "1")
	if res.Stdout != "hi\nü 2\n" {
		t.Errorf("stdout = %q, want %q", res.Stdout, "hi\nü 2\n")
	}
	if res.StdoutTruncated {
		t.Error("stdout_truncated is set for 8 bytes of output")
	}
}

// caseStdoutTruncated: stdout beyond the cap is cut and flagged; the call
// itself still succeeds.
func caseStdoutTruncated(t *testing.T, h *harness) {
	const limit = 64 << 10
	code := "for i in range(3000):\n    print('x' * 99)\nreturn 'done'" // 300 000 bytes
	res := h.execute(t, shared.ExecuteRequest{Code: code, MaxOutputBytes: limit, Timeout: 20 * time.Second})
	expectSuccess(t, code, res, `"done"`)
	if !res.StdoutTruncated {
		t.Errorf("stdout_truncated is false after printing 300000 bytes with max_output_bytes %d (got %d bytes)", limit, len(res.Stdout))
	}
	// A short truncation marker is tolerated.
	if len(res.Stdout) > limit+256 {
		t.Errorf("stdout is %d bytes, want at most the cap of %d", len(res.Stdout), limit)
	}
	if !strings.HasPrefix(res.Stdout, strings.Repeat("x", 99)+"\n") {
		t.Errorf("truncated stdout does not keep the beginning of the output: %q", res.Stdout[:min(len(res.Stdout), 120)])
	}
}

// caseOutputLimit: a result larger than max_output_bytes is output_limit.
func caseOutputLimit(t *testing.T, h *harness) {
	code := "return 'x' * (2 * 1024 * 1024)"
	res := h.execute(t, shared.ExecuteRequest{Code: code, MaxOutputBytes: 1 << 20, Timeout: 20 * time.Second})
	expectFailure(t, code, res, shared.KindOutputLimit)
	if len(res.Output) > 1<<20 {
		t.Errorf("the oversize output (%d bytes) was returned anyway", len(res.Output))
	}
	// Just under the cap is fine.
	code = "return 'x' * (512 * 1024)"
	res = h.execute(t, shared.ExecuteRequest{Code: code, MaxOutputBytes: 1 << 20, Timeout: 20 * time.Second})
	if !res.Success || len(res.Output) != 512*1024+2 {
		t.Errorf("Execute(%s) with max_output_bytes 1 MiB: want success with a 512 KiB string: %s", quote(code), dump(res))
	}
}

// timeoutCase runs code with a 500ms timeout and checks that it ends with
// error_kind timeout, promptly, and that the backend is still usable.
func timeoutCase(t *testing.T, h *harness, code string, allow []string) {
	t.Helper()
	const timeout = 500 * time.Millisecond
	bound := h.scaled(2 * time.Second)
	start := time.Now()
	res := h.execute(t, shared.ExecuteRequest{Code: code, AllowedImports: allow, Timeout: timeout})
	elapsed := time.Since(start)
	expectFailure(t, code, res, shared.KindTimeout)
	if elapsed > bound {
		t.Errorf("a %v timeout took %v to return, want under %v", timeout, elapsed.Round(time.Millisecond), bound)
	}
	if res.Limits.TimeoutMS != timeout.Milliseconds() {
		t.Errorf("limits.timeout_ms = %d, want %d", res.Limits.TimeoutMS, timeout.Milliseconds())
	}
	h.healthy(t, "a timeout")
}

// caseTimeoutCPULoop: a busy loop is stopped by the wall clock.
func caseTimeoutCPULoop(t *testing.T, h *harness) {
	timeoutCase(t, h, "while True:\n    pass", nil)
}

// caseTimeoutSleep: a sleeping call (no CPU used, so a CPU rlimit alone
// would not catch it) is stopped by the wall clock.
func caseTimeoutSleep(t *testing.T, h *harness) {
	timeoutCase(t, h, "import time\ntime.sleep(30)\nreturn 1", []string{"time"})
}

// caseMemoryLimit: allocating past memory_mb is error_kind memory, whether
// the allocation is one block or grows step by step.
func caseMemoryLimit(t *testing.T, h *harness) {
	for _, tc := range []struct{ name, code string }{
		{"one_block", "x = bytearray(2 * 1024 ** 3)\nreturn len(x)"},
		{"incremental", "x = []\nwhile True:\n    x.append(bytearray(1024 * 1024))"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.execute(t, shared.ExecuteRequest{Code: tc.code, MemoryMB: 64, Timeout: 20 * time.Second})
			expectFailure(t, tc.code, res, shared.KindMemory)
			if res.Limits.MemoryMB != 64 {
				t.Errorf("limits.memory_mb = %d, want 64", res.Limits.MemoryMB)
			}
			h.healthy(t, "a memory-limit failure")
		})
	}
}

// caseCancel: cancelling the caller's context stops a running call promptly;
// it reports a context error (or a failed result), never success.
func caseCancel(t *testing.T, h *harness) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := time.AfterFunc(300*time.Millisecond, cancel)
	defer timer.Stop()
	code := "while True:\n    pass"
	res, elapsed, err := h.call(ctx, shared.ExecuteRequest{Code: code, Timeout: 30 * time.Second})
	if bound := 300*time.Millisecond + h.scaled(2*time.Second); elapsed > bound {
		t.Errorf("Execute returned %v after it started, %v after its context was cancelled; want under %v",
			elapsed.Round(time.Millisecond), (elapsed - 300*time.Millisecond).Round(time.Millisecond), bound)
	}
	switch {
	case err != nil:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Execute with a cancelled context returned %v; want an error that is context.Canceled", err)
		}
	case res.Success:
		t.Errorf("Execute of an endless loop succeeded after its context was cancelled: %s", dump(res))
	}
	h.healthy(t, "a cancelled call")
}

// caseInvalidArgs: args that are not a JSON object are refused, either as
// an ErrInvalidArgument Go error or as error_kind invalid_args.
func caseInvalidArgs(t *testing.T, h *harness) {
	for _, tc := range []struct{ name, args string }{
		{"array", `[1, 2]`},
		{"malformed", `{"x": `},
		{"string", `"x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _, err := h.call(h.ctx(t), shared.ExecuteRequest{Code: "return args", Args: json.RawMessage(tc.args)})
			if err != nil {
				if !errors.Is(err, shared.ErrInvalidArgument) {
					t.Errorf("Execute with args %s returned %v; want an error wrapping shared.ErrInvalidArgument", tc.args, err)
				}
				return
			}
			if res.Success || res.ErrorKind != shared.KindInvalidArgs {
				t.Errorf("Execute with args %s: want shared.ErrInvalidArgument or error_kind %q, got %s",
					tc.args, shared.KindInvalidArgs, dump(res))
			}
		})
	}
}

// caseOversizeCode: a megabyte of code is refused quickly with a clear
// answer (validation, or ErrInvalidArgument), never run.
func caseOversizeCode(t *testing.T, h *harness) {
	code := strings.Repeat("x = 1\n", 200_000) + "return 1"
	res, _, err := h.call(h.ctx(t), shared.ExecuteRequest{Code: code})
	if err != nil {
		if !errors.Is(err, shared.ErrInvalidArgument) && !errors.Is(err, shared.ErrValidation) {
			t.Errorf("Execute of 1.2 MB of code returned %v; want shared.ErrInvalidArgument or a validation rejection", err)
		}
		return
	}
	if res.Success {
		t.Errorf("Execute of 1.2 MB of code succeeded; want it refused as oversize")
	} else if res.ErrorKind != shared.KindValidation {
		t.Errorf("Execute of 1.2 MB of code: error_kind %q, want %q: %s", res.ErrorKind, shared.KindValidation, dump(res))
	}
}

// caseLimitsEchoed: the result records the limits that applied — those
// requested, and the backend's defaults when none were — for every limit
// the backend declares it enforces.
func caseLimitsEchoed(t *testing.T, h *harness) {
	t.Run("requested", func(t *testing.T) {
		req := shared.ExecuteRequest{Code: "return 1", Timeout: 3 * time.Second, MemoryMB: 256, MaxOutputBytes: 123456}
		res := h.execute(t, req)
		expectSuccess(t, req.Code, res, "1")
		if h.info.Has(shared.CapWallClockTimeout) && res.Limits.TimeoutMS != 3000 {
			t.Errorf("limits.timeout_ms = %d, want 3000", res.Limits.TimeoutMS)
		}
		if h.info.Has(shared.CapMemoryLimit) && res.Limits.MemoryMB != 256 {
			t.Errorf("limits.memory_mb = %d, want 256", res.Limits.MemoryMB)
		}
		if h.info.Has(shared.CapOutputLimit) && res.Limits.MaxOutputBytes != 123456 {
			t.Errorf("limits.max_output_bytes = %d, want 123456", res.Limits.MaxOutputBytes)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		res := h.execute(t, shared.ExecuteRequest{Code: "return 1"})
		expectSuccess(t, "return 1", res, "1")
		if h.info.Has(shared.CapWallClockTimeout) && res.Limits.TimeoutMS <= 0 {
			t.Errorf("no timeout requested: limits.timeout_ms = %d, want the backend default (> 0)", res.Limits.TimeoutMS)
		}
		if h.info.Has(shared.CapMemoryLimit) && res.Limits.MemoryMB <= 0 {
			t.Errorf("no memory_mb requested: limits.memory_mb = %d, want the backend default (> 0)", res.Limits.MemoryMB)
		}
		if h.info.Has(shared.CapOutputLimit) && res.Limits.MaxOutputBytes <= 0 {
			t.Errorf("no max_output_bytes requested: limits.max_output_bytes = %d, want the backend default (> 0)", res.Limits.MaxOutputBytes)
		}
	})
}

// caseDuration: duration_ms measures the call (> 0).
func caseDuration(t *testing.T, h *harness) {
	code := "return sum(range(200000))"
	res := h.execute(t, shared.ExecuteRequest{Code: code})
	expectSuccess(t, code, res, "19999900000")
	if res.DurationMS <= 0 {
		t.Errorf("duration_ms = %v, want > 0", res.DurationMS)
	}
}

// caseConcurrent: 8 goroutines × 3 calls each get their own args, output and
// stdout back.
func caseConcurrent(t *testing.T, h *harness) {
	const workers, calls = 8, 3
	code := "print(args['i'])\nreturn {'i': args['i'], 'sq': args['i'] * args['i']}"
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for c := 0; c < calls; c++ {
				i := w*calls + c
				res, elapsed, err := h.call(h.ctx(t), shared.ExecuteRequest{
					Code: code, Args: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)), Timeout: 30 * time.Second,
				})
				if err != nil {
					t.Errorf("call %d: Go error %v", i, err)
					continue
				}
				if msg := invariantViolation(res, elapsed); msg != "" {
					t.Errorf("call %d: %s", i, msg)
				}
				want := fmt.Sprintf(`{"i": %d, "sq": %d}`, i, i*i)
				if !res.Success || !jsonEqual(res.Output, []byte(want)) {
					t.Errorf("call %d: want success with %s, got %s", i, want, dump(res))
				}
				if wantOut := fmt.Sprintf("%d\n", i); res.Stdout != wantOut {
					t.Errorf("call %d: stdout %q, want %q (output of calls mixed?)", i, res.Stdout, wantOut)
				}
			}
		}(w)
	}
	wg.Wait()
}

// caseSessions: a backend declaring sessions opens, uses and closes one; any
// other backend answers Open and Close with shared.ErrNotSupported, which
// must survive the wire as that class.
func caseSessions(t *testing.T, h *harness) {
	ctx := h.ctx(t)
	if !h.info.Has(shared.CapSessions) {
		if _, err := h.sb.Open(ctx, shared.OpenRequest{UserID: "conformance"}); !errors.Is(err, shared.ErrNotSupported) {
			t.Errorf("Open on a backend without the sessions capability returned %v; want shared.ErrNotSupported", err)
		}
		if _, err := h.sb.Close(ctx, shared.CloseRequest{SessionID: "nope"}); !errors.Is(err, shared.ErrNotSupported) {
			t.Errorf("Close on a backend without the sessions capability returned %v; want shared.ErrNotSupported", err)
		}
		return
	}
	user := h.cfg.sessionFor
	if user == "" {
		user = "conformance"
	}
	open, err := h.sb.Open(ctx, shared.OpenRequest{UserID: user})
	if err != nil {
		t.Fatalf("Open(user %q): %v", user, err)
	}
	if open.SessionID == "" {
		t.Fatal("Open returned an empty SessionID")
	}
	res, err := h.sb.Execute(ctx, shared.ExecuteRequest{Code: "return 7", SessionID: open.SessionID, UserID: user})
	if err != nil {
		t.Fatalf("Execute in session %q: %v", open.SessionID, err)
	}
	expectSuccess(t, "return 7", res.Result, "7")
	if _, err := h.sb.Close(ctx, shared.CloseRequest{SessionID: open.SessionID}); err != nil {
		t.Errorf("Close(%q): %v", open.SessionID, err)
	}
	if _, err := h.sb.Close(ctx, shared.CloseRequest{SessionID: "conformance-no-such-session"}); err == nil {
		t.Error("Close of an unknown session succeeded; want shared.ErrNotFound")
	} else if !errors.Is(err, shared.ErrNotFound) {
		t.Errorf("Close of an unknown session returned %v; want shared.ErrNotFound", err)
	}
}

// caseUnsafeOptIn: a tier-0 backend (no isolation) refuses to run code unless
// Configure said unsafe=true, with shared.ErrFailedPrecondition.
func caseUnsafeOptIn(t *testing.T, h *harness) {
	if h.info.Tier != 0 {
		t.Skipf("backend %q is tier %d; the unsafe opt-in applies to tier 0 only", h.info.Name, h.info.Tier)
	}
	ctx := h.ctx(t)
	req := h.cfg.configure
	req.Unsafe = false
	_, err := h.sb.Configure(ctx, req)
	if err == nil {
		_, err = h.sb.Execute(ctx, shared.ExecuteRequest{Code: "return 1"})
		if err == nil {
			t.Fatal("a tier-0 backend configured with unsafe=false ran code; want shared.ErrFailedPrecondition")
		}
	}
	if !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("a tier-0 backend configured with unsafe=false returned %v; want shared.ErrFailedPrecondition", err)
	}
}

// checkSchema checks a config schema: named, unique attributes of the
// types the host decodes, nested blocks (shared.ConfigBlock) with
// attributes of their own and no deeper blocks.
func checkSchema(t *testing.T, where string, schema []shared.ConfigAttribute) {
	t.Helper()
	seen := map[string]bool{}
	for _, a := range schema {
		if a.Name == "" {
			t.Errorf("%s has an attribute without a name: %+v", where, a)
		}
		if seen[a.Name] {
			t.Errorf("%s declares %q twice", where, a.Name)
		}
		seen[a.Name] = true
		switch a.Type {
		case "string", "number", "bool", "list(string)":
			if len(a.Attributes) > 0 {
				t.Errorf("%s attribute %q of type %q has nested attributes", where, a.Name, a.Type)
			}
		case shared.ConfigBlock:
			if where != "ConfigSchema" {
				t.Errorf("%s nests block %q: one level of blocks only", where, a.Name)
			}
			if len(a.Attributes) == 0 {
				t.Errorf("%s block %q declares no attributes", where, a.Name)
			}
			checkSchema(t, where+" block "+a.Name, a.Attributes)
		default:
			t.Errorf("%s attribute %q has type %q; want string, number, bool, list(string) or %q", where, a.Name, a.Type, shared.ConfigBlock)
		}
	}
}

// caseStreaming: a backend that declares streaming implements
// shared.Streamer; the chunks it sends add up to the result's stdout, stay
// within the output cap, and an error from send ends the call promptly.
func caseStreaming(t *testing.T, h *harness) {
	st, ok := h.sb.(shared.Streamer)
	if !ok {
		t.Fatalf("the backend declares %q but does not implement shared.Streamer", shared.CapStreaming)
	}
	stream := func(req shared.ExecuteRequest, send func(shared.OutputChunk) error) (shared.ExecutionResult, error) {
		if h.session != "" {
			req.SessionID, req.UserID = h.session, h.cfg.sessionFor
		}
		resp, err := st.ExecuteStream(h.ctx(t), req, send)
		return resp.Result, err
	}
	t.Run("adds_up", func(t *testing.T) {
		var mu sync.Mutex
		var got strings.Builder
		code := "print('hi')\nprint('ü', 2)\nreturn 1"
		res, err := stream(shared.ExecuteRequest{Code: code}, func(c shared.OutputChunk) error {
			mu.Lock()
			defer mu.Unlock()
			if c.Stream != shared.StreamStdout {
				t.Errorf("a chunk of stream %q, want %q", c.Stream, shared.StreamStdout)
			}
			got.Write(c.Data)
			return nil
		})
		if err != nil {
			t.Fatalf("ExecuteStream(%s): %v", quote(code), err)
		}
		expectSuccess(t, code, res, "1")
		if got.String() != "hi\nü 2\n" || res.Stdout != got.String() {
			t.Errorf("streamed %q, result stdout %q, want both %q", got.String(), res.Stdout, "hi\nü 2\n")
		}
	})
	t.Run("within_the_cap", func(t *testing.T) {
		const limit = 64 << 10
		var mu sync.Mutex
		n := 0
		code := "for i in range(3000):\n    print('x' * 99)\nreturn 'done'"
		res, err := stream(shared.ExecuteRequest{Code: code, MaxOutputBytes: limit, Timeout: 20 * time.Second}, func(c shared.OutputChunk) error {
			mu.Lock()
			defer mu.Unlock()
			n += len(c.Data)
			return nil
		})
		if err != nil {
			t.Fatalf("ExecuteStream: %v", err)
		}
		expectSuccess(t, code, res, `"done"`)
		if n > limit+256 {
			t.Errorf("streamed %d bytes with max_output_bytes %d", n, limit)
		}
	})
	t.Run("send_error_ends_the_call", func(t *testing.T) {
		stop := errors.New("the caller went away")
		code := "print('x', flush=True)\nwhile True:\n    pass"
		start := time.Now()
		_, err := stream(shared.ExecuteRequest{Code: code, Timeout: 30 * time.Second}, func(shared.OutputChunk) error { return stop })
		if err == nil {
			t.Fatalf("ExecuteStream(%s) with a send that fails: no error", quote(code))
		}
		if d := time.Since(start); d > 15*time.Second {
			t.Errorf("a failing send ended the call only after %v (timeout 30 s)", d)
		}
	})
}

// caseAgentDeath: the agent of a named session is killed from outside
// while a call runs. That call fails promptly with shared.ErrUnavailable
// and a message; the next call on the same session id succeeds in a fresh
// agent and says StateLost (once); interpreter state is gone, the user's
// tool library (WithPersistentLibrary) is not; the session still closes.
func caseAgentDeath(t *testing.T, h *harness) {
	if h.cfg.kill == nil {
		t.Skip("the backend's test passes no conformance.WithAgentKiller, so the death of a session's agent is not exercised")
	}
	ctx := h.ctx(t)
	user := h.cfg.sessionFor
	if user == "" {
		user = "conformance"
	}
	sid := fmt.Sprintf("conf-death-%d", time.Now().UnixNano()%1e9)
	if _, err := h.sb.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
		t.Fatalf("Open(%q): %v", sid, err)
	}
	defer func() {
		if _, err := h.sb.Close(context.WithoutCancel(ctx), shared.CloseRequest{SessionID: sid}); err != nil {
			t.Errorf("Close(%q) after the agent's death: %v", sid, err)
		}
	}()
	exec := func(req shared.ExecuteRequest) (shared.ExecutionResult, error) {
		req.SessionID, req.UserID = sid, user
		resp, err := h.sb.Execute(ctx, req)
		return resp.Result, err
	}
	stateful := h.info.Has(shared.CapStatefulSessions)
	if stateful {
		res, err := exec(shared.ExecuteRequest{Code: "counter = 41\nreturn counter", Stateful: true})
		if err != nil || !res.Success || res.StateLost {
			t.Fatalf("stateful call before the kill: %+v, %v", res, err)
		}
	}
	library := h.cfg.library && h.info.Has(shared.CapToolLibrary)
	const tool = "conformance_death_tool"
	if library {
		res, err := exec(shared.ExecuteRequest{Code: "return 3", ToolName: tool})
		if err != nil || !res.Success {
			t.Fatalf("library call before the kill: %+v, %v", res, err)
		}
		if !libraryHas(t, ctx, h.sb, sid, tool) {
			t.Fatalf("the library has no %s right after its call", tool)
		}
	}

	// A call that runs until the agent dies.
	st := h.sb.(shared.Streamer)
	started := make(chan struct{})
	var once sync.Once
	errc := make(chan error, 1)
	go func() {
		_, err := st.ExecuteStream(ctx, shared.ExecuteRequest{
			Code: "import time\nprint('started', flush=True)\ntime.sleep(120)\nreturn 1", AllowedImports: []string{"time"},
			Timeout: 180 * time.Second, SessionID: sid, UserID: user,
		}, func(shared.OutputChunk) error {
			once.Do(func() { close(started) })
			return nil
		})
		errc <- err
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("the long call ended before the kill: %v", err)
	case <-time.After(h.scaled(60 * time.Second)):
		t.Fatal("the long call printed nothing within 60 s")
	}
	h.cfg.kill(t, h.impl, sid)
	select {
	case err := <-errc:
		if !errors.Is(err, shared.ErrUnavailable) {
			t.Fatalf("the call whose agent was killed: %v, want an error wrapping ErrUnavailable", err)
		}
		t.Logf("the call in flight: %v", err)
	case <-time.After(h.scaled(30 * time.Second)):
		t.Fatal("the call whose agent was killed did not return within 30 s")
	}

	// The next call reopens the session.
	bound := h.cfg.reopen
	if bound <= 0 {
		bound = 30 * time.Second
	}
	start := time.Now()
	res, err := exec(shared.ExecuteRequest{Code: "return 2"})
	took := time.Since(start)
	if err != nil {
		t.Fatalf("the first call after the agent's death: %v (want a fresh agent)", err)
	}
	expectSuccess(t, "return 2", res, "2")
	if !res.StateLost {
		t.Errorf("the first call after the agent's death: StateLost false, want true")
	}
	t.Logf("reopened in %v", took.Round(time.Millisecond))
	if took > h.scaled(bound) {
		t.Errorf("the first call after the agent's death took %v, over %v", took, h.scaled(bound))
	}
	res, err = exec(shared.ExecuteRequest{Code: "return 3"})
	if err != nil || !res.Success || res.StateLost {
		t.Errorf("the second call after the agent's death: %+v, %v (want success without StateLost)", res, err)
	}
	if stateful {
		res, err := exec(shared.ExecuteRequest{Code: "return counter", Stateful: true})
		if err != nil || res.Success {
			t.Errorf("a stateful call after the reopen still sees the old globals: %+v, %v", res, err)
		}
	}
	if library && !libraryHas(t, ctx, h.sb, sid, tool) {
		t.Errorf("the user's tool library lost %s with the agent", tool)
	}
}

// libraryHas reports whether the tool library of session sid lists name.
func libraryHas(t *testing.T, ctx context.Context, sb shared.Sandbox, sid, name string) bool {
	t.Helper()
	tools, ok := sb.(shared.SessionTools)
	if !ok {
		t.Fatalf("the backend declares %q but does not implement shared.SessionTools", shared.CapToolLibrary)
	}
	tok, err := tools.MintToken(ctx, shared.MintTokenRequest{SessionID: sid, Scope: shared.ScopeOperator, TTL: time.Minute})
	if err != nil {
		t.Fatalf("MintToken(operator): %v", err)
	}
	resp, err := tools.CallTool(ctx, shared.CallToolRequest{SessionID: sid, Tool: "list_tools", Token: tok.Token, Arguments: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatalf("list_tools: %v", err)
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(resp.Result, &list); err != nil {
		t.Fatalf("list_tools result %s: %v", resp.Result, err)
	}
	for _, e := range list.Tools {
		if e.Name == name {
			return true
		}
	}
	return false
}

// casePause: a session backend that declares pause implements
// shared.SessionPauser: a paused session refuses calls
// (ErrSessionPaused) and a second pause, comes back on Resume under its
// id and user (with a stateful global kept when it declares
// pause_memory), refuses a resume when it runs (ErrFailedPrecondition),
// and a session with a call in flight is not paused (ErrSessionBusy) and
// finishes its call. One that does not declare pause answers Pause with
// ErrNotSupported and keeps the session running.
func casePause(t *testing.T, h *harness) {
	ctx := h.ctx(t)
	user := h.cfg.sessionFor
	if user == "" {
		user = "conformance"
	}
	sid := fmt.Sprintf("conf-pause-%d", time.Now().UnixNano()%1e9)
	if _, err := h.sb.Open(ctx, shared.OpenRequest{UserID: user, SessionID: sid}); err != nil {
		t.Fatalf("Open(%q): %v", sid, err)
	}
	defer func() {
		if _, err := h.sb.Close(context.WithoutCancel(ctx), shared.CloseRequest{SessionID: sid}); err != nil {
			t.Errorf("Close(%q): %v", sid, err)
		}
	}()
	exec := func(req shared.ExecuteRequest) (shared.ExecutionResult, error) {
		req.SessionID, req.UserID = sid, user
		resp, err := h.sb.Execute(ctx, req)
		return resp.Result, err
	}
	sp, ok := h.sb.(shared.SessionPauser)
	if !h.info.Has(shared.CapPause) {
		if !ok {
			return // nothing to call: the host refuses pause on the capability
		}
		if _, err := sp.Pause(ctx, shared.PauseRequest{SessionID: sid}); !errors.Is(err, shared.ErrNotSupported) {
			t.Errorf("Pause on a backend without the %q capability: %v, want ErrNotSupported", shared.CapPause, err)
		}
		if res, err := exec(shared.ExecuteRequest{Code: "return 1"}); err != nil || !res.Success {
			t.Errorf("the session after a refused pause: %+v, %v", res, err)
		}
		return
	}
	if !ok {
		t.Fatalf("the backend declares %q but does not implement shared.SessionPauser", shared.CapPause)
	}
	stateful := h.info.Has(shared.CapStatefulSessions)
	if stateful {
		if res, err := exec(shared.ExecuteRequest{Code: "kept = 41\nreturn kept", Stateful: true}); err != nil || !res.Success {
			t.Fatalf("stateful call before the pause: %+v, %v", res, err)
		}
	}
	p, err := sp.Pause(ctx, shared.PauseRequest{SessionID: sid})
	if err != nil {
		t.Fatalf("Pause(%q): %v", sid, err)
	}
	if p.Memory != h.info.Has(shared.CapPauseMemory) {
		t.Errorf("Pause says memory %v; the backend declares pause_memory %v", p.Memory, h.info.Has(shared.CapPauseMemory))
	}
	if _, err := exec(shared.ExecuteRequest{Code: "return 1"}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("a call on the paused session: %v, want ErrSessionPaused", err)
	}
	if _, err := sp.Pause(ctx, shared.PauseRequest{SessionID: sid}); !errors.Is(err, shared.ErrSessionPaused) {
		t.Errorf("a second Pause: %v, want ErrSessionPaused", err)
	}
	r, err := sp.Resume(ctx, shared.ResumeRequest{SessionID: sid})
	if err != nil {
		t.Fatalf("Resume(%q): %v", sid, err)
	}
	if r.SessionID != sid || r.UserID != user {
		t.Errorf("Resume answered session %q user %q, want %q %q", r.SessionID, r.UserID, sid, user)
	}
	if stateful && h.info.Has(shared.CapPauseMemory) {
		res, err := exec(shared.ExecuteRequest{Code: "return kept + 1", Stateful: true})
		if err != nil || !res.Success || string(res.Output) != "42" || res.StateLost {
			t.Errorf("a global defined before the pause, after Resume: %+v, %v (want 42, state kept)", res, err)
		}
	}
	if _, err := sp.Resume(ctx, shared.ResumeRequest{SessionID: sid}); !errors.Is(err, shared.ErrFailedPrecondition) {
		t.Errorf("Resume of a running session: %v, want ErrFailedPrecondition", err)
	}
	if _, err := sp.Resume(ctx, shared.ResumeRequest{SessionID: "conformance-never-paused"}); !errors.Is(err, shared.ErrSessionNotFound) {
		t.Errorf("Resume of a session never paused: %v, want ErrSessionNotFound", err)
	}

	// Mid-call: refused, and the call finishes.
	st := h.sb.(shared.Streamer)
	started := make(chan struct{})
	var once sync.Once
	type result struct {
		res shared.ExecutionResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := st.ExecuteStream(ctx, shared.ExecuteRequest{
			Code: "import time\nprint('started', flush=True)\ntime.sleep(2)\nreturn 5", AllowedImports: []string{"time"},
			Timeout: 60 * time.Second, SessionID: sid, UserID: user,
		}, func(shared.OutputChunk) error {
			once.Do(func() { close(started) })
			return nil
		})
		done <- result{resp.Result, err}
	}()
	select {
	case <-started:
	case r := <-done:
		t.Fatalf("the call ended before it printed: %+v, %v", r.res, r.err)
	case <-time.After(h.scaled(60 * time.Second)):
		t.Fatal("the call printed nothing within 60 s")
	}
	if _, err := sp.Pause(ctx, shared.PauseRequest{SessionID: sid}); !errors.Is(err, shared.ErrSessionBusy) {
		t.Errorf("Pause mid-call: %v, want ErrSessionBusy", err)
	}
	if r := <-done; r.err != nil || !r.res.Success || string(r.res.Output) != "5" {
		t.Errorf("the call in flight after a refused pause: %+v, %v", r.res, r.err)
	}
}

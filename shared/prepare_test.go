package shared

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// A request that sets no limit under Defaults that set none gets the
// contract's defaults, every one of them.
func TestPrepareContractDefaults(t *testing.T) {
	p, err := Prepare(ExecuteRequest{Code: "return 1"}, Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	want := Resolved{Timeout: DefaultTimeout, MemoryMB: DefaultMemoryMB, MaxOutputBytes: DefaultMaxOutputBytes,
		MaxCodeBytes: DefaultMaxCodeBytes, MaxArgsBytes: DefaultMaxArgsBytes}
	if p.Resolved != want || string(p.Args) != "{}" {
		t.Fatalf("prepared %+v, want %+v and args {}", p, want)
	}
	if got := p.CPUSeconds(); got != 6 {
		t.Errorf("CPUSeconds of the default 5s = %d, want 6", got)
	}
}

// A backend's own defaults fill what the request leaves at zero; what the
// request sets wins.
func TestPrepareDefaultsAndOverrides(t *testing.T) {
	d := Defaults{Timeout: 2 * time.Second, MemoryMB: 64, MaxOutputBytes: 4096, MaxCodeBytes: 100, MaxArgsBytes: 50}
	p, err := Prepare(ExecuteRequest{Code: "return 1"}, d)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Resolved{Timeout: 2 * time.Second, MemoryMB: 64, MaxOutputBytes: 4096, MaxCodeBytes: 100, MaxArgsBytes: 50}); p.Resolved != want {
		t.Fatalf("defaults: %+v, want %+v", p.Resolved, want)
	}
	p, err = Prepare(ExecuteRequest{Code: "return 1", Timeout: 30 * time.Second, MemoryMB: 512, MaxOutputBytes: 1 << 24, Args: json.RawMessage(` { "a" : 1 } `)}, d)
	if err != nil {
		t.Fatal(err)
	}
	if p.Timeout != 30*time.Second || p.MemoryMB != 512 || p.MaxOutputBytes != 1<<24 || string(p.Args) != `{"a":1}` {
		t.Fatalf("overrides: %+v", p)
	}
}

// Resolving a request already resolved (the host's, then the plugin's)
// changes nothing.
func TestPrepareTwice(t *testing.T) {
	policy := Defaults{Name: `policy "p"`, Timeout: 3 * time.Second, MemoryMB: 256, MaxOutputBytes: 8192}
	req := ExecuteRequest{Code: "return args", Args: json.RawMessage(`{"x": [1, 2]}`), SessionID: "s"}
	first, err := Prepare(req, policy)
	if err != nil {
		t.Fatal(err)
	}
	onward := first.Apply(req)
	if onward.Timeout != 3*time.Second || onward.MemoryMB != 256 || onward.MaxOutputBytes != 8192 || string(onward.Args) != `{"x":[1,2]}` || onward.SessionID != "s" {
		t.Fatalf("Apply: %+v", onward)
	}
	second, err := Prepare(onward, Defaults{})
	if err != nil {
		t.Fatal(err)
	}
	if second.Timeout != first.Timeout || second.MemoryMB != first.MemoryMB || second.MaxOutputBytes != first.MaxOutputBytes || string(second.Args) != string(first.Args) {
		t.Fatalf("second resolution %+v differs from the first %+v", second, first)
	}
}

func TestPrepareCeilings(t *testing.T) {
	d := Defaults{Timeout: time.Second, MemoryMB: 64, MaxOutputBytes: 1000,
		Ceiling: Ceiling{Timeout: time.Minute, MemoryMB: 512, MaxOutputBytes: 4000}}
	for _, c := range []struct {
		req   ExecuteRequest
		field string // "": allowed
	}{
		{ExecuteRequest{}, ""},
		{ExecuteRequest{Timeout: time.Minute, MemoryMB: 512, MaxOutputBytes: 4000}, ""},
		{ExecuteRequest{Timeout: time.Minute + time.Millisecond}, "timeout"},
		{ExecuteRequest{MemoryMB: 513}, "memory_mb"},
		{ExecuteRequest{MaxOutputBytes: 4001}, "max_output_bytes"},
	} {
		c.req.Code = "return 1"
		for _, name := range []string{"", `policy "roomy"`} {
			d.Name = name
			_, err := Prepare(c.req, d)
			var fe *FieldError
			switch {
			case c.field == "" && err != nil:
				t.Errorf("%+v under %q: refused: %v", c.req, name, err)
			case c.field == "":
			case !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalidArgument) || !errors.Is(err, ErrAboveCeiling) || !strings.Contains(err.Error(), "ceiling"):
				t.Errorf("%+v under %q: %v, want a FieldError on %s naming the ceiling, matching ErrAboveCeiling", c.req, name, err, c.field)
			case name != "" && !strings.Contains(err.Error(), `policy "roomy"'s ceiling`) || name != "" && !strings.Contains(err.Error(), "raise ceiling { "+c.field+" }"):
				t.Errorf("%+v under %q: %v does not name the policy and its attribute", c.req, name, err)
			}
		}
	}
	// No ceiling: anything goes.
	if _, err := Prepare(ExecuteRequest{Code: "x", Timeout: 10 * time.Hour, MemoryMB: 1 << 20, MaxOutputBytes: 1 << 30}, Defaults{}); err != nil {
		t.Errorf("no ceiling: %v", err)
	}
	// A default above the ceiling is refused too: the ceiling bounds what runs.
	if _, err := Prepare(ExecuteRequest{Code: "x"}, Defaults{Ceiling: Ceiling{Timeout: time.Second}}); err == nil {
		t.Error("the default 5s passed a 1s ceiling")
	}
}

func TestPrepareRefuses(t *testing.T) {
	d := Defaults{MaxCodeBytes: 10, MaxArgsBytes: 20}
	for _, c := range []struct {
		name, field string
		req         ExecuteRequest
		d           Defaults
	}{
		{"negative timeout", "timeout", ExecuteRequest{Code: "x", Timeout: -time.Second}, d},
		{"negative memory", "memory_mb", ExecuteRequest{Code: "x", MemoryMB: -1}, d},
		{"negative output", "max_output_bytes", ExecuteRequest{Code: "x", MaxOutputBytes: -1}, d},
		{"memory below the floor", "memory_mb", ExecuteRequest{Code: "x", MemoryMB: MinMemoryMB - 1}, d},
		{"default memory below the floor", "memory_mb", ExecuteRequest{Code: "x"}, Defaults{MemoryMB: 16}},
		{"memory above the largest limit", "memory_mb", ExecuteRequest{Code: "x", MemoryMB: MaxMemoryMB + 1}, d},
		{"timeout above the longest", "timeout", ExecuteRequest{Code: "x", Timeout: MaxTimeout + time.Second}, d},
		{"default timeout above the longest", "timeout", ExecuteRequest{Code: "x"}, Defaults{Timeout: 1 << 62}},
		{"code", "code", ExecuteRequest{Code: strings.Repeat("x", 11)}, d},
		{"default code cap", "code", ExecuteRequest{Code: strings.Repeat("x", DefaultMaxCodeBytes+1)}, Defaults{}},
		{"args", "args", ExecuteRequest{Code: "x", Args: json.RawMessage(`{"a":"` + strings.Repeat("b", 20) + `"}`)}, d},
		{"args not an object", "args", ExecuteRequest{Code: "x", Args: json.RawMessage(`[1]`)}, d},
		{"args not JSON", "args", ExecuteRequest{Code: "x", Args: json.RawMessage(`{`)}, d},
	} {
		_, err := Prepare(c.req, c.d)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want a FieldError on %s", c.name, err, c.field)
		}
	}
	if _, err := Prepare(ExecuteRequest{Code: "x", MemoryMB: MinMemoryMB}, d); err != nil {
		t.Errorf("memory at the floor: %v", err)
	}
	if _, err := Prepare(ExecuteRequest{Code: "x", MemoryMB: MaxMemoryMB}, d); err != nil {
		t.Errorf("memory at the top: %v", err)
	}
	if p, err := Prepare(ExecuteRequest{Code: "x", Timeout: MaxTimeout}, d); err != nil || p.CPUSeconds() != math.MaxInt32 {
		t.Errorf("timeout at the top: %v, CPU seconds %d", err, p.CPUSeconds())
	}
	_, err := Prepare(ExecuteRequest{Code: strings.Repeat("x", 11)}, Defaults{Name: `policy "small"`, MaxCodeBytes: 10})
	if err == nil || err.Error() != `code is 11 bytes, policy "small" allows 10 (max_code_bytes)` {
		t.Errorf("code over a policy's cap: %v", err)
	}
}

// The timeout -> CPU seconds formula: the wall clock rounded up to whole
// seconds, plus one.
func TestCPUSeconds(t *testing.T) {
	for _, c := range []struct {
		timeout time.Duration
		want    int
	}{
		{time.Millisecond, 2},
		{500 * time.Millisecond, 2},
		{time.Second, 2},
		{time.Second + time.Millisecond, 3},
		{2500 * time.Millisecond, 4},
		{5 * time.Second, 6},
		{10 * time.Minute, 601},
	} {
		if got := (Resolved{Timeout: c.timeout}).CPUSeconds(); got != c.want {
			t.Errorf("CPUSeconds(%v) = %d, want %d", c.timeout, got, c.want)
		}
	}
}

func TestResolvedLimits(t *testing.T) {
	r := Resolved{Timeout: 1500 * time.Millisecond, MemoryMB: 64, MaxOutputBytes: 4096, MaxCodeBytes: 1, MaxArgsBytes: 2}
	if got, want := r.Limits(), (Limits{TimeoutMS: 1500, MemoryMB: 64, MaxOutputBytes: 4096}); got != want {
		t.Fatalf("Limits() = %+v, want %+v", got, want)
	}
}

func TestCheckCodeSize(t *testing.T) {
	if err := CheckCodeSize(strings.Repeat("x", 10), 10); err != nil {
		t.Error(err)
	}
	var fe *FieldError
	if err := CheckCodeSize(strings.Repeat("x", 11), 10); !errors.As(err, &fe) || fe.Field != "code" {
		t.Errorf("over the cap: %v", err)
	}
	if err := CheckCodeSize(strings.Repeat("x", DefaultMaxCodeBytes+1), 0); err == nil {
		t.Error("a zero cap is not the default cap")
	}
}

// Only a limit above its ceiling matches ErrAboveCeiling: a malformed
// request does not.
func TestOnlyCeilingsAreAboveCeiling(t *testing.T) {
	for _, req := range []ExecuteRequest{{Code: "x", Timeout: -1}, {Code: "x", MemoryMB: 1}, {Code: "x", Args: []byte("[]")}} {
		if _, err := Prepare(req, Defaults{}); err == nil || errors.Is(err, ErrAboveCeiling) {
			t.Errorf("%+v: %v, want a refusal that is not ErrAboveCeiling", req, err)
		}
	}
}

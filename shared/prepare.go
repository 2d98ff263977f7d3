package shared

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults are the limits of whoever resolves a request: the host's
// policy, or a backend's (or runtime's) own limits for a call that reaches
// it directly. They are what a limit the request leaves at zero becomes,
// the most a request may ask for, and the size caps of its code and args.
//
// A zero default takes the contract's (DefaultTimeout, DefaultMemoryMB,
// DefaultMaxOutputBytes, DefaultMaxCodeBytes, DefaultMaxArgsBytes), so a
// backend names only the limits it documents differently; a zero ceiling
// is no ceiling.
type Defaults struct {
	// Name is the policy the limits come from, as errors name it
	// (`policy "default"`): a refusal then points at the policy's
	// attribute to raise. Empty for a backend's own limits.
	Name string

	Timeout        time.Duration
	MemoryMB       int
	MaxOutputBytes int
	MaxCodeBytes   int
	MaxArgsBytes   int

	// Ceiling is the most a request may ask for.
	Ceiling Ceiling
}

// Ceiling is the most a request may ask for of each limit it may set; a
// zero field is no ceiling.
type Ceiling struct {
	Timeout        time.Duration
	MemoryMB       int
	MaxOutputBytes int
}

// Resolved are the effective limits of one execution, as Prepare resolved
// them from a request and Defaults: what a backend enforces, hands on to
// the process it runs (runner.Request.WithLimits) and records in the
// result (Limits). Every field is set.
type Resolved struct {
	Timeout        time.Duration // the wall clock
	MemoryMB       int           // the child's address-space cap (RLIMIT_AS)
	MaxOutputBytes int           // cap of the output, stdout and stderr each
	MaxCodeBytes   int           // cap of the body's source
	MaxArgsBytes   int           // cap of the JSON args
}

// CPUSeconds is the CPU-time limit that goes with the wall clock, the
// soft RLIMIT_CPU of the child in seconds: the timeout rounded up to a
// whole second, plus one. A body that computes for the whole wall clock
// is ended by the wall clock (a timeout that says so); RLIMIT_CPU is the
// kernel's bound for when that kill does not come in time. Every tier
// takes it from here.
func (r Resolved) CPUSeconds() int {
	return int(math.Ceil(r.Timeout.Seconds())) + 1
}

// Limits is the record of r that an ExecutionResult carries: every
// backend fills ExecutionResult.Limits with it.
func (r Resolved) Limits() Limits {
	return Limits{TimeoutMS: r.Timeout.Milliseconds(), MemoryMB: r.MemoryMB, MaxOutputBytes: r.MaxOutputBytes}
}

// Prepared is an ExecuteRequest's resolved limits and its args, checked
// and compacted.
type Prepared struct {
	Resolved
	Args json.RawMessage
}

// Apply returns req with p's limits and args in place of its own: the
// request to hand onward, so that the next stage (a plugin, a session's
// runtime) receives the resolved values and has nothing left to default.
func (p Prepared) Apply(req ExecuteRequest) ExecuteRequest {
	req.Timeout, req.MemoryMB, req.MaxOutputBytes, req.Args = p.Timeout, p.MemoryMB, p.MaxOutputBytes, p.Args
	return req
}

// Prepare resolves the limits of req under d: the one place a request's
// limits are checked and defaulted, by the host with its policy and by
// every backend with its own limits. It refuses a negative limit, a
// timeout above MaxTimeout, a memory limit outside MinMemoryMB..MaxMemoryMB, code or args over their caps, args that are not
// a JSON object and a limit above its ceiling; a zero limit takes d's
// value. Every error is a *FieldError (it wraps ErrInvalidArgument) on
// the request field at fault.
func Prepare(req ExecuteRequest, d Defaults) (Prepared, error) {
	switch {
	case req.Timeout < 0:
		return Prepared{}, &FieldError{Field: "timeout", Reason: fmt.Sprintf("timeout must not be negative (got %s)", req.Timeout)}
	case req.MemoryMB < 0:
		return Prepared{}, &FieldError{Field: "memory_mb", Reason: fmt.Sprintf("memory_mb must not be negative (got %d)", req.MemoryMB)}
	case req.MaxOutputBytes < 0:
		return Prepared{}, &FieldError{Field: "max_output_bytes", Reason: fmt.Sprintf("max_output_bytes must not be negative (got %d)", req.MaxOutputBytes)}
	}
	d = d.contract()
	r := Resolved{
		Timeout:        orDefault(req.Timeout, d.Timeout),
		MemoryMB:       orDefault(req.MemoryMB, d.MemoryMB),
		MaxOutputBytes: orDefault(req.MaxOutputBytes, d.MaxOutputBytes),
		MaxCodeBytes:   d.MaxCodeBytes,
		MaxArgsBytes:   d.MaxArgsBytes,
	}
	if r.Timeout > MaxTimeout {
		return Prepared{}, &FieldError{Field: "timeout", Reason: fmt.Sprintf("timeout %s is above the longest of %s", r.Timeout, MaxTimeout)}
	}
	if err := CheckMemoryMB(r.MemoryMB); err != nil {
		return Prepared{}, err
	}
	if err := checkSize("code", "code is", len(req.Code), r.MaxCodeBytes, d.Name); err != nil {
		return Prepared{}, err
	}
	if err := checkSize("args", "args are", len(req.Args), r.MaxArgsBytes, d.Name); err != nil {
		return Prepared{}, err
	}
	args, err := NormalizeArgs(req.Args)
	if err != nil {
		return Prepared{}, err
	}
	if err := d.checkCeiling(r); err != nil {
		return Prepared{}, err
	}
	return Prepared{Resolved: r, Args: args}, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// contract returns d with its zero defaults replaced by the contract's.
func (d Defaults) contract() Defaults {
	d.Timeout = orDefault(d.Timeout, DefaultTimeout)
	d.MemoryMB = orDefault(d.MemoryMB, DefaultMemoryMB)
	d.MaxOutputBytes = orDefault(d.MaxOutputBytes, DefaultMaxOutputBytes)
	d.MaxCodeBytes = orDefault(d.MaxCodeBytes, DefaultMaxCodeBytes)
	d.MaxArgsBytes = orDefault(d.MaxArgsBytes, DefaultMaxArgsBytes)
	return d
}

// ErrAboveCeiling is matched by Prepare's refusal of a limit above its
// ceiling, besides ErrInvalidArgument and the *FieldError on the limit:
// the request asked for more than the policy (or the backend) allows,
// which a caller may report apart from a malformed request. It does not
// cross the plugin wire (there the refusal is its *FieldError).
var ErrAboveCeiling = errors.New("above the ceiling")

// ceilingError is the refusal of a limit above its ceiling: its
// *FieldError, and ErrAboveCeiling.
type ceilingError struct{ field *FieldError }

func (e *ceilingError) Error() string   { return e.field.Error() }
func (e *ceilingError) Unwrap() []error { return []error{e.field, ErrAboveCeiling} }

// checkCeiling refuses a resolved limit above d's ceiling for it.
func (d Defaults) checkCeiling(r Resolved) error {
	if fe := d.ceilingField(r); fe != nil {
		return &ceilingError{field: fe}
	}
	return nil
}

// ceilingField is the *FieldError of the first limit of r above d's
// ceiling, nil when there is none.
func (d Defaults) ceilingField(r Resolved) *FieldError {
	whose, raise := "the", func(string) string { return "" }
	if d.Name != "" {
		whose = d.Name + "'s"
		raise = func(attr string) string { return ", or raise ceiling { " + attr + " } in the policy" }
	}
	c := d.Ceiling
	switch {
	case c.Timeout > 0 && r.Timeout > c.Timeout:
		return &FieldError{Field: "timeout", Reason: fmt.Sprintf(
			"timeout %s is above %s ceiling of %s; ask for at most that%s", r.Timeout, whose, c.Timeout, raise("timeout"))}
	case c.MemoryMB > 0 && r.MemoryMB > c.MemoryMB:
		return &FieldError{Field: "memory_mb", Reason: fmt.Sprintf(
			"memory of %d MB is above %s ceiling of %d MB; ask for at most that%s", r.MemoryMB, whose, c.MemoryMB, raise("memory_mb"))}
	case c.MaxOutputBytes > 0 && r.MaxOutputBytes > c.MaxOutputBytes:
		return &FieldError{Field: "max_output_bytes", Reason: fmt.Sprintf(
			"an output cap of %d bytes is above %s ceiling of %d; ask for at most that%s", r.MaxOutputBytes, whose, c.MaxOutputBytes, raise("max_output_bytes"))}
	}
	return nil
}

// checkSize refuses n bytes of field over max; policy, when set, names
// the policy whose max_<field>_bytes it is.
func checkSize(field, subject string, n, max int, policy string) error {
	switch {
	case n <= max:
		return nil
	case policy != "":
		return &FieldError{Field: field, Reason: fmt.Sprintf("%s %d bytes, %s allows %d (max_%s_bytes)", subject, n, policy, max, field)}
	default:
		return &FieldError{Field: field, Reason: fmt.Sprintf("%s %d bytes, over the limit of %d bytes", subject, n, max)}
	}
}

// CheckCodeSize refuses code over max bytes (0 means DefaultMaxCodeBytes)
// with a *FieldError on "code": what Validate checks before the static
// checks, as Prepare does for Execute.
func CheckCodeSize(code string, max int) error {
	return checkSize("code", "code is", len(code), orDefault(max, DefaultMaxCodeBytes), "")
}

// NormalizeArgs checks that raw is a JSON object (empty means {}) and returns
// it compacted. The error is a *FieldError on "args".
func NormalizeArgs(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}"), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, &FieldError{Field: "args", Reason: fmt.Sprintf("args must be a JSON object; this is not valid JSON (%v)", err)}
	}
	if err := CheckArgsObject(buf.Bytes()); err != nil {
		return nil, err
	}
	return json.RawMessage(buf.Bytes()), nil
}

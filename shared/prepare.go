package shared

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Defaults are a backend's limits: what a request that leaves a limit at
// zero gets, and the size caps every request must fit. A zero Timeout,
// MemoryMB or MaxOutputBytes leaves the request's zero as it is.
type Defaults struct {
	Timeout        time.Duration
	MemoryMB       int
	MaxOutputBytes int
	MaxCodeBytes   int
	MaxArgsBytes   int
}

// Prepared is an ExecuteRequest with its limits resolved and its args
// checked and compacted.
type Prepared struct {
	Timeout        time.Duration
	MemoryMB       int
	MaxOutputBytes int
	Args           json.RawMessage
}

// CheckCodeSize refuses code over max bytes with an error wrapping
// ErrInvalidArgument.
func CheckCodeSize(code string, max int) error {
	if len(code) > max {
		return fmt.Errorf("code is %d bytes, over the limit of %d bytes: %w", len(code), max, ErrInvalidArgument)
	}
	return nil
}

// Prepare checks what every backend checks before it runs a request —
// no negative limit, code and args within their caps, args a JSON object —
// and fills zero limits from d. Every error wraps ErrInvalidArgument.
func Prepare(req ExecuteRequest, d Defaults) (Prepared, error) {
	p := Prepared{Timeout: req.Timeout, MemoryMB: req.MemoryMB, MaxOutputBytes: req.MaxOutputBytes}
	if p.Timeout < 0 || p.MemoryMB < 0 || p.MaxOutputBytes < 0 {
		return p, fmt.Errorf("negative limit (timeout %v, memory_mb %d, max_output_bytes %d): %w", p.Timeout, p.MemoryMB, p.MaxOutputBytes, ErrInvalidArgument)
	}
	if err := CheckMemoryMB(p.MemoryMB); err != nil {
		return p, err
	}
	if p.Timeout == 0 {
		p.Timeout = d.Timeout
	}
	if p.MemoryMB == 0 {
		p.MemoryMB = d.MemoryMB
	}
	if p.MaxOutputBytes == 0 {
		p.MaxOutputBytes = d.MaxOutputBytes
	}
	if err := CheckCodeSize(req.Code, d.MaxCodeBytes); err != nil {
		return p, err
	}
	if len(req.Args) > d.MaxArgsBytes {
		return p, fmt.Errorf("args are %d bytes, over the limit of %d bytes: %w", len(req.Args), d.MaxArgsBytes, ErrInvalidArgument)
	}
	args, err := NormalizeArgs(req.Args)
	if err != nil {
		return p, err
	}
	p.Args = args
	return p, nil
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

package shared

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// MinMemoryMB is the smallest memory limit an execution may ask for. Below
// it a fresh CPython cannot even map its shared libraries (spawn mode dies
// before the runner starts), and a forked child already maps more than that,
// so RLIMIT_AS would not bound what the body allocates: the limit would be a
// promise the sandbox cannot keep.
const MinMemoryMB = 32

// MaxMemoryMB is the largest memory limit an execution may ask for (2
// PiB): the most every tier holds as it is, in the fork-server's C loop (a
// C int of MB) and in bytes (MB << 20, RLIMIT_AS) alike. A larger one
// would wrap around to another limit.
const MaxMemoryMB = math.MaxInt32

// MaxTimeout is the longest wall clock an execution may ask for (about 68
// years): the most whose CPU limit (Resolved.CPUSeconds) the fork-server's
// C loop holds as it is, in a C int of seconds.
const MaxTimeout = (math.MaxInt32 - 1) * time.Second

// CheckMemoryMB refuses a memory limit the sandbox cannot enforce (0 means
// the default and passes). The error is a *FieldError on "memory_mb".
func CheckMemoryMB(mb int) error {
	switch {
	case mb != 0 && mb < MinMemoryMB:
		return &FieldError{Field: "memory_mb", Reason: fmt.Sprintf("memory_mb of %d MB is below the floor of %d MB that a Python child needs to start; ask for at least %d", mb, MinMemoryMB, MinMemoryMB)}
	case mb > MaxMemoryMB:
		return &FieldError{Field: "memory_mb", Reason: fmt.Sprintf("memory_mb of %d MB is above the largest limit of %d MB", mb, MaxMemoryMB)}
	}
	return nil
}

// CheckArgsObject checks that raw (an execution's args, already trimmed and
// non-empty) is one JSON object. The error is a *FieldError on "args" that
// says what raw is instead, in JSON's terms.
func CheckArgsObject(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v)
		return &FieldError{Field: "args", Reason: fmt.Sprintf("args must be a JSON object; this is not valid JSON (%v)", err)}
	}
	kind := ""
	switch raw[0] {
	case '{':
		return nil
	case '[':
		kind = "an array"
	case '"':
		kind = "a string"
	case 't', 'f':
		kind = "a boolean"
	case 'n':
		kind = "null"
	default:
		kind = "a number"
	}
	return &FieldError{Field: "args", Reason: "args must be a JSON object such as {\"x\": 1}, not " + kind}
}

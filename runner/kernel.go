package runner

import (
	"encoding/json"
	"fmt"
	"sync"
)

// MarshalJSON encodes the seal config together with, under "kernel", what
// the runner needs of this architecture to apply it: the machine name
// (os.uname's), the numbers of the system calls it makes without a C
// library wrapper, the named constants it passes to the kernel, and the
// seccomp programs assembled by package runner/seccomp as hex strings by
// kind. Every tier that sends a Seal sends these, so the Python side holds
// no system call number, constant or filter of its own. The table is
// computed once per process; decoding ignores it.
//
// A runner given a seal config without a table for its machine (an older
// sender, another architecture) treats every layer that needs one as
// missing, and so fails closed where such a layer is required.
func (s Seal) MarshalJSON() ([]byte, error) {
	k, err := kernelTableJSON()
	if err != nil {
		return nil, err
	}
	type fields Seal // the struct without this method
	if s.MaxProcs <= 0 {
		s.MaxProcs = DefaultMaxProcs
	}
	return json.Marshal(struct {
		fields
		Kernel json.RawMessage `json:"kernel,omitempty"`
	}{fields(s), k})
}

// KernelTable is the "kernel" member of an encoded Seal.
type KernelTable struct {
	// Machine is the architecture the table is for, as os.uname reports it
	// ("x86_64", "aarch64"): the runner uses nothing of a table for
	// another one.
	Machine string `json:"machine"`
	// Sys holds the system call numbers the runner calls through
	// syscall(2), by name.
	Sys map[string]uint64 `json:"sys"`
	// Const holds the kernel constants the runner passes (prctl options,
	// clone flags, Landlock access rights), by their C name.
	Const map[string]uint64 `json:"const"`
	// Seccomp holds the seccomp programs by kind ("full", "zygote",
	// "child"): struct sock_filter arrays in the host's byte order, hex
	// encoded. Empty when SeccompError says why there are none.
	Seccomp      map[string]string `json:"seccomp,omitempty"`
	SeccompError string            `json:"seccomp_error,omitempty"`
}

// kernelTableJSON is the encoded KernelTable of this architecture, or nil
// where there is none.
var kernelTableJSON = sync.OnceValues(func() (json.RawMessage, error) {
	t, err := kernelTable()
	if err != nil || t == nil {
		return nil, err
	}
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encoding the kernel table: %w", err)
	}
	return b, nil
})

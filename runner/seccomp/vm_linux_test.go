//go:build linux && (amd64 || arm64)

package seccomp

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// dataSize is the size of struct seccomp_data.
const dataSize = 64

// seccompData is a system call as the filter sees it.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

// packet renders d for bpf.VM. The kernel lays out struct seccomp_data in
// the host's byte order and a seccomp BPF word load returns the host-order
// 32-bit word at the offset; bpf.VM loads a big-endian word from its
// packet. So the struct is laid out natively first (what the kernel has)
// and every 32-bit word is then rewritten big-endian: each load in the VM
// returns the value the same load returns in the kernel.
func (d seccompData) packet() []byte {
	native := make([]byte, 0, dataSize)
	native = binary.NativeEndian.AppendUint32(native, d.nr)
	native = binary.NativeEndian.AppendUint32(native, d.arch)
	native = binary.NativeEndian.AppendUint64(native, 0x7f0000001234) // instruction_pointer
	for _, a := range d.args {
		native = binary.NativeEndian.AppendUint64(native, a)
	}
	out := make([]byte, dataSize)
	for i := 0; i < dataSize; i += 4 {
		binary.BigEndian.PutUint32(out[i:], binary.NativeEndian.Uint32(native[i:]))
	}
	return out
}

// native returns the seccomp_data of system call nr with args on this
// architecture.
func native(nr uint32, args ...uint64) seccompData {
	d := seccompData{nr: nr, arch: auditArch}
	copy(d.args[:], args)
	return d
}

// decode parses a struct sock_filter array in the host's byte order (as
// Program returns it) into raw instructions.
func decode(b []byte) ([]bpf.RawInstruction, error) {
	if len(b) == 0 || len(b)%8 != 0 {
		return nil, fmt.Errorf("program of %d bytes is not a non-empty whole number of 8-byte instructions", len(b))
	}
	raw := make([]bpf.RawInstruction, 0, len(b)/8)
	for i := 0; i < len(b); i += 8 {
		raw = append(raw, bpf.RawInstruction{
			Op: binary.NativeEndian.Uint16(b[i:]),
			Jt: b[i+2],
			Jf: b[i+3],
			K:  binary.NativeEndian.Uint32(b[i+4:]),
		})
	}
	return raw, nil
}

// filter is an assembled program, loaded into the VM.
type filter struct {
	vm  *bpf.VM
	ins []bpf.Instruction
}

// load decodes the bytes the kernel would be given and checks them as the
// kernel's seccomp_check_filter does: only word loads from aligned offsets
// inside seccomp_data, constant ALU and conditional jumps, returns of
// constants, unconditional forward jumps inside the program; at most
// BPF_MAXINSNS instructions.
func load(t *testing.T, prog []byte) filter {
	t.Helper()
	raw, err := decode(prog)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > unix.BPF_MAXINSNS {
		t.Fatalf("%d instructions, more than BPF_MAXINSNS", len(raw))
	}
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("program does not disassemble: %v", ins)
	}
	for i, in := range ins {
		switch in := in.(type) {
		case bpf.LoadAbsolute:
			if in.Size != 4 || in.Off%4 != 0 || in.Off >= dataSize {
				t.Fatalf("instruction %d: %v is not an aligned word load inside seccomp_data", i, in)
			}
		case bpf.Jump:
			if int(in.Skip) >= len(ins)-i-1 {
				t.Fatalf("instruction %d: %v jumps past the end", i, in)
			}
		case bpf.JumpIf, bpf.ALUOpConstant, bpf.RetConstant:
		default:
			t.Fatalf("instruction %d: %T %v not expected in a seccomp filter", i, in, in)
		}
	}
	vm, err := bpf.NewVM(ins)
	if err != nil {
		t.Fatal(err)
	}
	return filter{vm: vm, ins: ins}
}

// loadKind assembles the program of kind k and loads it.
func loadKind(t *testing.T, k Kind) filter {
	t.Helper()
	prog, err := Program(k)
	if err != nil {
		t.Fatal(err)
	}
	return load(t, prog)
}

// run returns the action of f for d.
func (f filter) run(t *testing.T, d seccompData) uint32 {
	t.Helper()
	ret, err := f.vm.Run(d.packet())
	if err != nil {
		t.Fatalf("VM: %v", err)
	}
	return uint32(ret)
}

// stacked returns the action the kernel takes when filters are stacked:
// every filter runs and the action of highest precedence wins (equal
// actions: the most recently installed filter's data).
func stacked(t *testing.T, d seccompData, fs ...filter) uint32 {
	t.Helper()
	best := uint32(unix.SECCOMP_RET_ALLOW)
	for _, f := range fs {
		if a := f.run(t, d); precedence(a) >= precedence(best) {
			best = a
		}
	}
	return best
}

// precedence orders actions as the kernel does (a higher number wins).
func precedence(action uint32) int {
	switch action & unix.SECCOMP_RET_ACTION_FULL {
	case unix.SECCOMP_RET_KILL_PROCESS:
		return 7
	case unix.SECCOMP_RET_KILL_THREAD:
		return 6
	case unix.SECCOMP_RET_TRAP:
		return 5
	case unix.SECCOMP_RET_ERRNO:
		return 4
	case unix.SECCOMP_RET_USER_NOTIF:
		return 3
	case unix.SECCOMP_RET_TRACE:
		return 2
	case unix.SECCOMP_RET_LOG:
		return 1
	}
	return 0 // SECCOMP_RET_ALLOW
}

const (
	retAllow = unix.SECCOMP_RET_ALLOW
	retKill  = unix.SECCOMP_RET_KILL_PROCESS
	retEPERM = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retNOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
)

// actionName renders an action for failure messages.
func actionName(a uint32) string {
	switch a {
	case retAllow:
		return "ALLOW"
	case retKill:
		return "KILL_PROCESS"
	case retEPERM:
		return "ERRNO(EPERM)"
	case retNOSYS:
		return "ERRNO(ENOSYS)"
	}
	return fmt.Sprintf("%#x", a)
}

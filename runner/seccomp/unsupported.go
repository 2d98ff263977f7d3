//go:build !linux || !(amd64 || arm64)

package seccomp

import (
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
)

func build(Kind) ([]bpf.Instruction, error) {
	return nil, fmt.Errorf("%w: %s/%s", ErrUnsupported, runtime.GOOS, runtime.GOARCH)
}

func allowed(Kind) []string { return nil }

func denied(Kind) []string { return nil }

//go:build !linux

package runner

// kernelTable returns nil: the runner's sealing layers are Linux's.
func kernelTable() (*KernelTable, error) { return nil, nil }

// Package plugin carries the shared.Sandbox contract across a process
// boundary: the go-plugin handshake and plugin type, Serve for a backend's
// main, the gRPC adapters on both sides (sandbox, session tools, file store,
// streaming), the caller's trace context on every call, and the mapping of
// package shared's error classes to gRPC statuses and back, so that
// errors.Is holds in the host for an error a plugin returned.
package plugin

// Package inprocess is the tier-0 backend: the shared Python runner executed
// by a CPython interpreter embedded in the plugin process (cgo, libpython3),
// with the runner's validator, curated builtins and import shim and no
// process isolation at all. Executions run one at a time on the
// interpreter's thread; a watchdog interrupts a call past its deadline, and
// the plugin process exits when the call ignores that (Config.GraceMS).
// Configure refuses (shared.ErrFailedPrecondition) unless the sandbox block
// sets `unsafe = true`.
//
// cmd/orqest-sandbox-plugin-inprocess serves it as a go-plugin.
package inprocess

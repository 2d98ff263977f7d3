// Package conformance is the test suite every orqest-sandbox backend runs from
// its own `go test` to prove that it honours the Sandbox contract, in the
// manner of Go's testing/fstest.TestFS or Nomad's driver harness.
//
// A backend author adds one test to the package that builds the backend:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) shared.Sandbox {
//			return NewBackend(hclog.NewNullLogger())
//		})
//	}
//
// Run executes every case twice: once directly against the value the factory
// returns ("inprocess/<Case>") and once through the real go-plugin gRPC path
// ("grpc/<Case>"): the value is served with plugin.TestPluginGRPCConn and the
// case talks to the shared.Sandbox that the client dispenses, exactly as the
// host does. Error classes, findings, limits and results therefore have to
// survive the wire.
//
// The cases cover: Info (name, tier, API versions, config schema, identical
// over gRPC); return values of every JSON type; args; allowed and denied
// imports; forbidden builtins; syntax errors; validation rejections through
// both Validate and Execute; runtime errors with traceback text; wall-clock
// timeouts of CPU loops and of sleeps; memory caps; output caps; stdout
// capture and truncation; non-serialisable results; malformed args;
// cancellation; concurrent calls; the limits echoed in the result; sessions;
// and, for tier 0, the unsafe opt-in. The list is CaseNames.
//
// Cases that need an isolation property check the capabilities the backend
// declares in Info and call t.Skip with a message that names the missing
// capability: a backend is never silently excused. Options choose the
// Configure request sent first (WithConfigure), scale the time bounds for
// slow machines (WithTimeoutScale), open a session per case (WithSession),
// or skip a named case with a stated reason (WithSkip).
//
// Throughout, a failure of the user's code must land in the ExecutionResult
// (success=false, error, error_kind) and never as a Go error; a Go error is
// reserved for infrastructure and must wrap one of the error classes of
// package shared.
package conformance

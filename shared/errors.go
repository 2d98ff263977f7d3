package shared

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Error classes that survive the gRPC boundary. A backend wraps one or more
// of them (fmt.Errorf("...: %w", shared.ErrInvalidArgument)); the gRPC
// adapters of package shared/plugin carry them as a status detail and map
// them back, so errors.Is works in the host. This follows containerd's
// errdefs/errgrpc.
var (
	// ErrInvalidArgument: the request was malformed (oversize code, bad args).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: a named thing (session, plugin) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrSessionNotFound: the session a call names is not open in the
	// backend (never opened, closed, or lost with an earlier backend
	// process), as opposed to a thing inside the session, such as a
	// workspace file or a tool, that does not exist. It matches ErrNotFound
	// too (errors.Is), so a backend that returns it stays understood by a
	// host that knows only ErrNotFound; the host reopens a session it
	// opened itself when the backend answers this (see host.Sandbox.Open).
	// A backend wraps it: fmt.Errorf("no open session %q: %w", id,
	// shared.ErrSessionNotFound).
	ErrSessionNotFound = fmt.Errorf("session %w", ErrNotFound)
	// ErrSessionBusy: the session has a call in flight, so it cannot be
	// paused now; nothing was changed. It matches ErrFailedPrecondition.
	ErrSessionBusy = fmt.Errorf("session busy: %w", ErrFailedPrecondition)
	// ErrSessionPaused: the session is paused (SessionPauser); resume it
	// first. Nothing ran. It matches ErrFailedPrecondition.
	ErrSessionPaused = fmt.Errorf("session paused: %w", ErrFailedPrecondition)
	// ErrFailedPrecondition: the backend refuses in its current state (e.g. an
	// unsafe backend that was not opted in).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrPermissionDenied: the caller is not allowed to do this (a refused
	// token, a dependency outside the policy's allowed_packages).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrNotSupported: the backend does not implement this optional call.
	ErrNotSupported = errors.New("not supported")
	// ErrUnavailable: the backend cannot serve now (python missing, engine down).
	ErrUnavailable = errors.New("unavailable")
	// ErrPluginShutdown: the plugin process died or its connection is gone.
	ErrPluginShutdown = errors.New("plugin shut down")
	// ErrInternal: an unexpected infrastructure failure inside the backend.
	ErrInternal = errors.New("internal error")
	// ErrNotRun: the request never reached the backend's code (the plugin
	// was gone before it was sent, or refused it while shutting down), so
	// sending it again to a new plugin process cannot run it twice. It comes
	// together with the class of why (usually ErrPluginShutdown).
	ErrNotRun = errors.New("request not run")
	// ErrValidation: the code was rejected by static validation. Returned
	// wrapped in *ValidationError.
	ErrValidation = errors.New("validation failed")
)

// ValidationError reports every finding of a rejected body. It matches
// ErrValidation with errors.Is.
type ValidationError struct {
	Findings []Finding
}

// Error summarises the first finding and how many more there are.
func (e *ValidationError) Error() string {
	if len(e.Findings) == 0 {
		return "validation failed"
	}
	var b strings.Builder
	b.WriteString("validation failed: ")
	b.WriteString(e.Findings[0].String())
	if n := len(e.Findings) - 1; n > 0 {
		fmt.Fprintf(&b, " (and %d more)", n)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrValidation) true.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// FieldError is an ErrInvalidArgument that names the request field at fault
// ("code", "args", "timeout"), so a caller can point at it without reading
// the message. errors.Is(err, ErrInvalidArgument) holds for it.
type FieldError struct {
	// Field is the request field the error is about.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// Error reads "<field> <reason>" when the reason does not already start with
// the field, as in "args must be a JSON object".
func (e *FieldError) Error() string {
	if strings.HasPrefix(e.Reason, e.Field+" ") {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidArgument }

// Rejected is the result of a body that static validation rejected: not a
// success, output null, the error summarising the findings, error kind
// validation, the findings, and the limits the call would have run with.
// Every stage that validates (host, plugin) reports a rejection with it.
func Rejected(findings []Finding, limits Limits) ExecutionResult {
	return ExecutionResult{
		Output:    json.RawMessage("null"),
		Error:     (&ValidationError{Findings: findings}).Error(),
		ErrorKind: KindValidation,
		Findings:  findings,
		Limits:    limits,
	}
}

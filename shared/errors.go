package shared

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Error classes that survive the gRPC boundary. A backend wraps one of them
// (fmt.Errorf("...: %w", shared.ErrInvalidArgument)); the gRPC server adapter
// maps it to a status code and the client adapter maps it back, so
// errors.Is works in the host. This follows containerd's errdefs/errgrpc.
var (
	// ErrInvalidArgument: the request was malformed (oversize code, bad args).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotFound: a named thing (session, plugin) does not exist.
	ErrNotFound = errors.New("not found")
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

var classCodes = []struct {
	class error
	code  codes.Code
}{
	{ErrInvalidArgument, codes.InvalidArgument},
	{ErrNotFound, codes.NotFound},
	{ErrFailedPrecondition, codes.FailedPrecondition},
	{ErrPermissionDenied, codes.PermissionDenied},
	{ErrNotSupported, codes.Unimplemented},
	{ErrUnavailable, codes.Unavailable},
	{ErrPluginShutdown, codes.Aborted},
	{ErrInternal, codes.Internal},
	{ErrValidation, codes.InvalidArgument},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// ToGRPC converts err into a gRPC status error carrying the code of its class.
// It is used by the server adapter; plugin authors need not call it.
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isClassed(err) {
		return err
	}
	for _, c := range classCodes {
		if errors.Is(err, c.class) {
			return status.Error(c.code, err.Error())
		}
	}
	return status.Error(codes.Unknown, err.Error())
}

func isClassed(err error) bool {
	for _, c := range classCodes {
		if errors.Is(err, c.class) {
			return true
		}
	}
	return false
}

// FromGRPC converts a gRPC status error back into an error that wraps the
// matching class. Transport failures (the plugin process is gone) become
// ErrPluginShutdown.
func FromGRPC(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	switch st.Code() {
	case codes.InvalidArgument:
		return &classedError{ErrInvalidArgument, msg}
	case codes.NotFound:
		return &classedError{ErrNotFound, msg}
	case codes.FailedPrecondition:
		return &classedError{ErrFailedPrecondition, msg}
	case codes.PermissionDenied:
		return &classedError{ErrPermissionDenied, msg}
	case codes.Unimplemented:
		return &classedError{ErrNotSupported, msg}
	case codes.Unavailable:
		// Unavailable from the transport means the connection is gone; a
		// backend's own "unavailable" carries its class name in the message.
		if strings.Contains(msg, ErrUnavailable.Error()) {
			return &classedError{ErrUnavailable, msg}
		}
		return &classedError{ErrPluginShutdown, msg}
	case codes.Aborted:
		return &classedError{ErrPluginShutdown, msg}
	case codes.Internal:
		return &classedError{ErrInternal, msg}
	case codes.DeadlineExceeded:
		return &classedError{context.DeadlineExceeded, msg}
	case codes.Canceled:
		return &classedError{context.Canceled, msg}
	}
	return &classedError{ErrInternal, msg}
}

type classedError struct {
	class error
	msg   string
}

func (e *classedError) Error() string { return e.msg }
func (e *classedError) Unwrap() error { return e.class }

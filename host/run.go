package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/orqest/sandbox/shared"
)

// Stages of a RunError.
const (
	StageValidation     = "validation"     // static checks rejected the code (or the request was malformed)
	StagePolicy         = "policy"         // the sandbox's policy refused the request before anything ran (a *PolicyError)
	StageExecution      = "execution"      // the code ran and failed (runtime error, timeout, memory, ...)
	StageInfrastructure = "infrastructure" // the sandbox itself failed (plugin died, launch failed)
)

// PolicyError is the error of a request the sandbox's policy refused
// before anything ran: a limit above the policy's ceiling, a dangerous or
// unreviewed module in the allowed imports that the policy does not
// acknowledge, a dependency outside allowed_packages. Err is the refusal
// itself, with its class (a *shared.FieldError and
// shared.ErrAboveCeiling for a ceiling, shared.ErrFailedPrecondition for
// an import, shared.ErrPermissionDenied for a dependency); errors.Is and
// errors.As see through to it.
type PolicyError struct {
	// Policy is the name of the policy that refused the request.
	Policy string
	Err    error
}

// Error is the refusal's message.
func (e *PolicyError) Error() string { return e.Err.Error() }

// Unwrap returns the refusal.
func (e *PolicyError) Unwrap() error { return e.Err }

// RunOptions are the optional inputs of RunInSandbox.
type RunOptions struct {
	// ReturnExpression, when set, is appended to the code as
	// "\nreturn <expr>\n", so code can be a definition and the expression
	// a call: ("def add(a, b): ...", "add(2, 3)").
	ReturnExpression string
	// Args is the `args` object of the body: a json.RawMessage, []byte or
	// string holding a JSON object, or any other value encoding/json turns
	// into one (a map or struct). nil means {}.
	Args any
	// AllowedImports is added to the sandbox policy's allowed_imports.
	AllowedImports []string
	// Timeout and MemoryMB override the policy when non-zero.
	Timeout  time.Duration
	MemoryMB int
}

// RunError is the error of RunInSandbox: which stage failed, the start of
// the code that was run, and the underlying error (a *shared.ValidationError,
// an *ExecutionError, or an infrastructure error wrapping a shared class).
type RunError struct {
	Stage       string
	CodeSnippet string
	Err         error
}

// Error is "sandbox <stage> failed: <cause>", e.g. "sandbox execution
// failed: sandbox execution timed out after 0.50s"; at the policy stage
// "sandbox policy refused the request: <cause>".
func (e *RunError) Error() string {
	var ve *shared.ValidationError
	cause := ""
	switch {
	case errors.As(e.Err, &ve) && len(ve.Findings) > 0:
		cause = ve.Findings[0].String()
		if n := len(ve.Findings) - 1; n > 0 {
			cause += fmt.Sprintf(" (and %d more)", n)
		}
	case e.Err != nil:
		cause = e.Err.Error()
	}
	if e.Stage == StagePolicy {
		return "sandbox policy refused the request: " + cause
	}
	return fmt.Sprintf("sandbox %s failed: %s", e.Stage, cause)
}

// Unwrap returns the underlying error.
func (e *RunError) Unwrap() error { return e.Err }

// ExecutionError is the underlying error of a RunError at the execution
// stage: the code ran and did not succeed. Result is the full result.
type ExecutionError struct {
	Result shared.ExecutionResult
}

// Error describes the failure: "<error> (<kind>)", and for a timeout "sandbox execution timed out
// after 0.50s".
func (e *ExecutionError) Error() string {
	r := e.Result
	if r.ErrorKind == shared.KindTimeout {
		return fmt.Sprintf("sandbox execution timed out after %.2fs", float64(r.Limits.TimeoutMS)/1000)
	}
	msg := strings.TrimSpace(r.Error)
	if msg == "" {
		msg = "execution failed"
	}
	if r.ErrorKind == shared.KindNone {
		return msg
	}
	return fmt.Sprintf("%s (%s)", msg, r.ErrorKind)
}

// WithReturn appends "\nreturn <expr>\n" to code; code is returned as is when
// expr is empty.
func WithReturn(code, expr string) string {
	if strings.TrimSpace(expr) == "" {
		return code
	}
	return code + "\nreturn " + expr + "\n"
}

// Snippet returns the first 200 characters of code, for error messages.
func Snippet(code string) string {
	const n = 200
	r := []rune(code)
	if len(r) <= n {
		return code
	}
	return string(r[:n]) + "…"
}

// RunInSandbox is the "given code, return the value" helper: it appends the return expression, runs the code in sb,
// and unwraps the ExecutionResult into its JSON output. Any failure is a
// *RunError whose Stage is "validation", "policy", "execution" or
// "infrastructure".
func RunInSandbox(ctx context.Context, sb *Sandbox, code string, opts RunOptions) (json.RawMessage, error) {
	full := WithReturn(code, opts.ReturnExpression)
	fail := func(stage string, err error) (json.RawMessage, error) {
		return nil, &RunError{Stage: stage, CodeSnippet: Snippet(full), Err: err}
	}
	if sb == nil {
		return fail(StageInfrastructure, fmt.Errorf("nil sandbox: %w", shared.ErrInvalidArgument))
	}
	args, err := marshalArgs(opts.Args)
	if err != nil {
		return fail(StageValidation, err)
	}
	res, err := sb.Execute(ctx, shared.ExecuteRequest{
		Code:           full,
		Args:           args,
		AllowedImports: opts.AllowedImports,
		Timeout:        opts.Timeout,
		MemoryMB:       opts.MemoryMB,
	})
	switch stage := StageOf(res, err); {
	case stage == "":
		return res.Output, nil
	case err != nil:
		return fail(stage, err)
	case stage == StageValidation:
		return fail(stage, &shared.ValidationError{Findings: res.Findings})
	default:
		return fail(stage, &ExecutionError{Result: res})
	}
}

// StageOf returns the stage at which an execution failed, from what
// Sandbox.Execute returned: "" for a success; StagePolicy for a
// *PolicyError; StageValidation for a malformed request
// (shared.ErrInvalidArgument) or code the static checks rejected;
// StageInfrastructure for any other error; StageExecution for code that
// ran and failed. Every front end (RunInSandbox, the CLI, MCP) reports it
// from here.
func StageOf(res shared.ExecutionResult, err error) string {
	var pe *PolicyError
	switch {
	case err != nil && errors.As(err, &pe):
		return StagePolicy
	case err != nil && (errors.Is(err, shared.ErrInvalidArgument) || errors.Is(err, shared.ErrValidation)):
		return StageValidation
	case err != nil:
		return StageInfrastructure
	case res.ErrorKind == shared.KindValidation:
		return StageValidation
	case !res.Success:
		return StageExecution
	}
	return ""
}

// RunInSandboxSafe is RunInSandbox that never fails: it returns ok, the
// output, and the error message ("" when ok), e.g. (false, nil, "sandbox
// execution failed: sandbox execution timed out after 0.50s").
func RunInSandboxSafe(ctx context.Context, sb *Sandbox, code string, opts RunOptions) (ok bool, output json.RawMessage, errMsg string) {
	out, err := RunInSandbox(ctx, sb, code, opts)
	if err != nil {
		return false, nil, err.Error()
	}
	return true, out, ""
}

func marshalArgs(a any) (json.RawMessage, error) {
	switch v := a.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return v, nil
	case []byte:
		return json.RawMessage(v), nil
	case string:
		return json.RawMessage(v), nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("args: %v: %w", err, shared.ErrInvalidArgument)
	}
	return b, nil
}

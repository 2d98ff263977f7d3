package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/orqest/sandbox/rules"
	"github.com/orqest/sandbox/shared"
)

// ErrProtocol is wrapped by every error ParseResponse returns: the child's
// response is not one the runner writes. The child ran user code that may
// have escaped the Python layers, so the response is not trusted: the caller
// reports an infrastructure failure naming the child, never a result.
var ErrProtocol = errors.New("child response breaks the protocol")

// MaxOutputDepth is how deeply a result may nest (arrays and objects). A
// deeper result is reported as not_serializable: it would overflow the
// recursion of many JSON clients (CPython's json module gives up at about
// 1000 levels).
const MaxOutputDepth = 256

// childKinds are the error kinds a child may report. The others (timeout,
// killed) are decided by the parent from what it observed.
var childKinds = map[shared.ErrorKind]bool{
	shared.KindValidation:      true,
	shared.KindMemory:          true,
	shared.KindRuntime:         true,
	shared.KindNotSerializable: true,
	shared.KindOutputLimit:     true,
	shared.KindInvalidArgs:     true,
	KindInternal:               true,
}

// ParseResponse parses what the child wrote to fd 3, strictly: one JSON
// object with only the protocol's fields, each at most once; an error kind
// the child may report; findings only with a validation error, each naming
// a rule of the rules table. Anything else is an error wrapping ErrProtocol.
// A result (output) that nests deeper than MaxOutputDepth, repeats a key in
// an object, or holds a number outside float64's range comes back as a
// not_serializable response: the user's value, not the protocol, is at
// fault, and no client is handed it.
func ParseResponse(data []byte) (Response, error) {
	var resp Response
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return resp, fmt.Errorf("empty response: %w", ErrProtocol)
	}
	// The runner writes UTF-8 (a str holding a lone surrogate comes as an
	// escape, which the decoders below accept); raw invalid bytes it never
	// writes.
	if !utf8.Valid(data) {
		return resp, fmt.Errorf("not UTF-8: %w", ErrProtocol)
	}
	// Keys are checked here, one by one; the decoder's own duplicate check
	// is off so that a repeated key inside the output is the output's fault.
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	bad := func(format string, a ...any) (Response, error) {
		return Response{}, fmt.Errorf(format+": %w", append(a, ErrProtocol)...)
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return bad("not a JSON object")
	}
	seen := map[string]bool{}
	var hasSuccess bool
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return bad("malformed: %v", err)
		}
		name := tok.String()
		if seen[name] {
			return bad("field %q repeated", name)
		}
		seen[name] = true
		val, err := dec.ReadValue()
		if err != nil {
			return bad("malformed %q: %v", name, err)
		}
		switch name {
		case "success":
			hasSuccess = true
			if err := json.Unmarshal(val, &resp.Success); err != nil {
				return bad("success is not a boolean")
			}
		case "output":
			resp.Output = json.RawMessage(bytes.Clone(val))
		case "error":
			if err := json.Unmarshal(val, &resp.Error); err != nil {
				return bad("error is not a string")
			}
		case "error_kind":
			if err := json.Unmarshal(val, &resp.ErrorKind); err != nil {
				return bad("error_kind is not a string")
			}
		case "findings":
			fd := json.NewDecoder(bytes.NewReader(val))
			fd.DisallowUnknownFields()
			if err := fd.Decode(&resp.Findings); err != nil {
				return bad("findings: %v", err)
			}
		default:
			return bad("unknown field %q", name)
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return bad("malformed: %v", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return bad("data after the response object")
	}
	if !hasSuccess {
		return bad("no success field")
	}

	if resp.Success {
		if resp.ErrorKind != "" || resp.Error != "" || resp.Findings != nil {
			return bad("a successful response carries an error")
		}
		if len(resp.Output) == 0 {
			resp.Output = json.RawMessage("null")
		}
		if why := checkOutput(resp.Output); why != "" {
			return Response{ErrorKind: string(shared.KindNotSerializable),
				Error: "result is not JSON-serialisable: " + why}, nil
		}
		return resp, nil
	}
	kind := shared.ErrorKind(resp.ErrorKind)
	if !childKinds[kind] {
		return bad("error_kind %q is not one a child reports", resp.ErrorKind)
	}
	if len(resp.Output) > 0 && !bytes.Equal(resp.Output, []byte("null")) {
		return bad("a failed response carries an output")
	}
	resp.Output = nil
	if resp.Findings != nil {
		if kind != shared.KindValidation {
			return bad("findings with error_kind %q", resp.ErrorKind)
		}
		known := rules.Default().Rules
		for _, f := range resp.Findings {
			if _, ok := known[f.Rule]; !ok {
				return bad("finding names no rule of the table (%q)", f.Rule)
			}
			if f.Line < 0 || f.Column < 0 {
				return bad("finding at line %d column %d", f.Line, f.Column)
			}
		}
	}
	return resp, nil
}

// checkOutput returns why the JSON value v may not be handed to a client
// ("" when it may): nesting deeper than MaxOutputDepth, a key repeated in
// an object, a number outside float64's range.
func checkOutput(v []byte) string {
	// Repeated keys are refused; a lone surrogate escape (which the runner
	// writes for a str that holds one) is not.
	dec := jsontext.NewDecoder(bytes.NewReader(v), jsontext.AllowInvalidUTF8(true))
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			var se *jsontext.SyntacticError
			if errors.As(err, &se) && errors.Is(err, jsontext.ErrDuplicateName) {
				return "an object repeats a key"
			}
			return "malformed: " + err.Error()
		}
		switch tok.Kind() {
		case '{', '[':
			if dec.StackDepth() > MaxOutputDepth {
				return fmt.Sprintf("it nests deeper than %d levels", MaxOutputDepth)
			}
		case '0':
			if f, err := tok.Float(); err != nil || math.IsInf(f, 0) {
				return "a number is outside the range of a 64-bit float"
			}
		}
	}
}

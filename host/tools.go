package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/orqest/sandbox/shared"
)

// GeneratedToolSpec describes a tool an LLM wrote: the Go form of the
// original's GeneratedToolSpec.
//
//	spec := host.GeneratedToolSpec{
//		Name:           "extract_dois",
//		Description:    "Extract DOIs from a text blob.",
//		Parameters:     map[string]any{"text": map[string]any{"type": "string"}},
//		Implementation: "import re\nreturn {'dois': re.findall(r'10\\.\\d{4,}/[\\w.\\-/]+', args['text'])}\n",
//		AllowedImports: []string{"re"},
//		Timeout:        2 * time.Second,
//	}
type GeneratedToolSpec struct {
	// Name is the tool's name: a letter followed by up to 63 letters,
	// digits or underscores.
	Name string `json:"name"`
	// Description tells a model what the tool does.
	Description string `json:"description,omitempty"`
	// Parameters describes the tool's arguments: a JSON Schema of type
	// "object", or the shorthand form, a map of parameter name to
	// schema ({"text": {"type": "string"}}; a bare type name such as
	// "string" is accepted for a schema), in which every parameter is
	// required and no other is accepted. Nil means no parameters. Give a
	// json.RawMessage, []byte or string holding JSON, a *jsonschema.Schema,
	// or any value encoding/json turns into an object (a map).
	Parameters any `json:"parameters,omitempty"`
	// Implementation is the body of a Python function that receives `args`
	// (the validated arguments) and returns a JSON-serialisable value.
	Implementation string `json:"implementation"`
	// AllowedImports are the modules the implementation may import. They
	// must lie within the sandbox policy's allowed_imports (see
	// WithTrustedImports); the implementation is checked against exactly
	// this list.
	AllowedImports []string `json:"allowed_imports,omitempty"`
	// Timeout bounds one call; zero means the policy's timeout, and a
	// larger value is lowered to it.
	Timeout time.Duration `json:"-"`
}

// ToolNameRe is the rule a tool name follows.
var ToolNameRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]{0,63}$`)

// MaxToolDescription is the longest description Spawn accepts, in bytes.
const MaxToolDescription = 8 << 10

// SpawnError is the error of ToolFactory.Spawn for a spec it rejects: the
// tool's name, what is wrong (Reason, which names the validator rule when
// the implementation was rejected), and the underlying error — a
// *shared.ValidationError for a rejected implementation, else an error
// wrapping shared.ErrInvalidArgument. An infrastructure failure during
// validation is returned as is, not as a SpawnError.
type SpawnError struct {
	Tool   string
	Reason string
	Err    error
}

func (e *SpawnError) Error() string { return fmt.Sprintf("spawn tool %q: %s", e.Tool, e.Reason) }

// Unwrap returns the underlying error.
func (e *SpawnError) Unwrap() error { return e.Err }

// ArgumentError is the error of Tool.Call (and Tool.ValidateArgs) for
// arguments that do not match the tool's schema. Field names the offending
// argument ("" when the problem is the arguments as a whole). It wraps
// shared.ErrInvalidArgument.
type ArgumentError struct {
	Tool    string
	Field   string
	Message string
}

func (e *ArgumentError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("tool %q: invalid arguments: %s", e.Tool, e.Message)
	}
	return fmt.Sprintf("tool %q: argument %q: %s", e.Tool, e.Field, e.Message)
}

// Is makes errors.Is(err, shared.ErrInvalidArgument) true.
func (e *ArgumentError) Is(target error) bool { return target == shared.ErrInvalidArgument }

// FactoryOption adjusts NewToolFactory.
type FactoryOption func(*ToolFactory)

// WithTrustedImports lets specs ask for these modules beyond the policy's
// allowed_imports. By default a spec may only narrow the policy: an LLM
// writes the spec, the operator writes the policy.
func WithTrustedImports(modules ...string) FactoryOption {
	return func(f *ToolFactory) { f.trusted = append(f.trusted, modules...) }
}

// WithReservedNames makes Spawn refuse these tool names (the MCP server
// reserves its own tools' names).
func WithReservedNames(names ...string) FactoryOption {
	return func(f *ToolFactory) {
		for _, n := range names {
			f.reserved[n] = true
		}
	}
}

// RunAs runs every execution of the factory (its tools' calls and
// RunPython) on behalf of user: the request's UserID, which keeps the
// user's state apart from other users' (a tier-1 zygote of its own, a
// tier-2 volume and library). When session is not nil, each execution runs
// in the session it returns (it may open one on its first call; an error
// fails that execution as an infrastructure error).
func RunAs(user string, session func(context.Context) (string, error)) FactoryOption {
	return func(f *ToolFactory) { f.user, f.session = user, session }
}

// ToolFactory turns GeneratedToolSpecs into callable Tools on one sandbox —
// a dynamic tool factory. It uses only the
// Sandbox API (Validate, Execute), so it works on every tier. When built
// with a Bus it publishes the tool.* and sandbox.validation_rejected events.
// It is safe for concurrent use.
type ToolFactory struct {
	sb       *Sandbox
	bus      *Bus
	trusted  []string
	reserved map[string]bool
	user     string                                // RunAs
	session  func(context.Context) (string, error) // RunAs

	mu    sync.RWMutex
	tools map[string]*Tool
}

// NewToolFactory returns a factory spawning tools on sb that publishes on
// bus (nil for none; usually Host.Bus()).
func NewToolFactory(sb *Sandbox, bus *Bus, opts ...FactoryOption) *ToolFactory {
	f := &ToolFactory{sb: sb, bus: bus, reserved: map[string]bool{}, tools: map[string]*Tool{}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Sandbox returns the sandbox the factory's tools run in.
func (f *ToolFactory) Sandbox() *Sandbox { return f.sb }

// executeStream runs req on the factory's sandbox as its caller (RunAs),
// with the output given to onChunk as it is written (nil: none). A request that names its session keeps it; else
// the session is RunAs's.
func (f *ToolFactory) executeStream(ctx context.Context, req shared.ExecuteRequest, onChunk func(shared.OutputChunk)) (shared.ExecutionResult, error) {
	req.UserID = f.user
	if f.session != nil && req.SessionID == "" {
		id, err := f.session(ctx)
		if err != nil {
			return shared.ExecutionResult{}, fmt.Errorf("session for user %q: %w", f.user, err)
		}
		req.SessionID = id
	}
	return f.sb.ExecuteStream(ctx, req, onChunk)
}

// Bus returns the bus the factory publishes on (nil for none).
func (f *ToolFactory) Bus() *Bus { return f.bus }

// Tool returns the spawned tool called name.
func (f *ToolFactory) Tool(name string) (*Tool, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t, ok := f.tools[name]
	return t, ok
}

// Tools returns the spawned tools sorted by name.
func (f *ToolFactory) Tools() []*Tool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*Tool, 0, len(f.tools))
	for _, t := range f.tools {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].spec.Name < out[j].spec.Name })
	return out
}

// Remove forgets the tool called name and reports whether it existed.
func (f *ToolFactory) Remove(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.tools[name]
	delete(f.tools, name)
	return ok
}

// Spawn checks spec and returns a Tool that runs it. It checks, in order:
// the name (ToolNameRe, not reserved), the description's size, the
// parameters schema (it must compile and describe an object), the imports
// (within the policy, see WithTrustedImports), the timeout, and finally the
// implementation through the sandbox's Validate (the host's validator under
// exactly spec.AllowedImports, then the plugin's). A rejected spec is a
// *SpawnError and publishes tool.spawn_failed (and
// sandbox.validation_rejected when the implementation was rejected); a
// spawned tool publishes tool.spawned and replaces any earlier tool of the
// same name.
func (f *ToolFactory) Spawn(ctx context.Context, spec GeneratedToolSpec) (*Tool, error) {
	t, err := f.build(ctx, spec)
	if err != nil {
		reason := err.Error()
		var se *SpawnError
		if errors.As(err, &se) {
			reason = se.Reason
		}
		f.bus.Emit(EventToolSpawnFailed, f.sb.Name(), map[string]any{"tool_name": spec.Name, "reason": reason})
		if errors.Is(err, shared.ErrValidation) {
			f.bus.Emit(EventValidationRejected, f.sb.Name(), map[string]any{"tool_name": spec.Name, "reason": reason})
		}
		return nil, err
	}
	f.mu.Lock()
	f.tools[t.spec.Name] = t
	f.mu.Unlock()
	f.bus.Emit(EventToolSpawned, f.sb.Name(), map[string]any{"tool_name": t.spec.Name})
	return t, nil
}

func (f *ToolFactory) build(ctx context.Context, spec GeneratedToolSpec) (*Tool, error) {
	reject := func(err error, format string, a ...any) (*Tool, error) {
		return nil, &SpawnError{Tool: spec.Name, Reason: fmt.Sprintf(format, a...), Err: err}
	}
	invalid := fmt.Errorf("invalid tool spec: %w", shared.ErrInvalidArgument)
	if f.sb == nil {
		return reject(invalid, "the factory has no sandbox")
	}
	switch {
	case spec.Name == "":
		return reject(invalid, "name is empty")
	case !ToolNameRe.MatchString(spec.Name):
		return reject(invalid, "name %q is not valid: it must start with a letter and contain only letters, digits and '_' (at most 64 characters)", spec.Name)
	case f.reserved[spec.Name]:
		return reject(invalid, "name %q is reserved", spec.Name)
	case len(spec.Description) > MaxToolDescription:
		return reject(invalid, "description is %d bytes, at most %d are allowed", len(spec.Description), MaxToolDescription)
	case strings.TrimSpace(spec.Implementation) == "":
		return reject(invalid, "implementation is empty")
	case spec.Timeout < 0:
		return reject(invalid, "timeout must not be negative (got %s)", spec.Timeout)
	}
	schema, err := compileParameters(spec.Parameters)
	if err != nil {
		return reject(invalid, "parameters: %v", err)
	}
	pol := f.sb.Policy()
	imports := cleanImports(spec.AllowedImports)
	ceiling := pol.Allowed(f.trusted...)
	for _, m := range imports {
		if !importAllowed(m, ceiling) {
			allowed := "none"
			if len(pol.AllowedImports) > 0 {
				allowed = strings.Join(pol.AllowedImports, ", ")
			}
			return reject(invalid, "allowed_imports: module %q is not allowed by policy %q of sandbox %q (its allowed_imports: %s)", m, pol.Name, f.sb.Name(), allowed)
		}
	}
	timeout := spec.Timeout
	if timeout == 0 || timeout > pol.Timeout {
		timeout = pol.Timeout
	}

	// The implementation must pass under exactly the spec's imports (the
	// host's validator), then under policy ∪ spec in the plugin.
	if fs := CheckCode(ctx, f.sb.host.opts.checker, Policy{Name: pol.Name, MaxCodeBytes: pol.MaxCodeBytes, Classes: pol.Classes}, spec.Implementation, imports...); len(fs) > 0 {
		ve := &shared.ValidationError{Findings: fs}
		return reject(ve, "implementation rejected: %s", ve.Error())
	}
	if err := f.sb.Validate(ctx, spec.Implementation, imports...); err != nil {
		var ve *shared.ValidationError
		if errors.As(err, &ve) {
			return reject(ve, "implementation rejected: %s", ve.Error())
		}
		return nil, fmt.Errorf("spawn tool %q: validate in sandbox %q: %w", spec.Name, f.sb.Name(), err)
	}
	spec.AllowedImports = imports
	return &Tool{factory: f, spec: spec, timeout: timeout, schema: schema}, nil
}

// Tool is a spawned tool: a validated implementation bound to a sandbox and
// an argument schema. It is safe for concurrent use.
type Tool struct {
	factory *ToolFactory
	spec    GeneratedToolSpec
	timeout time.Duration
	schema  *compiledSchema
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// Description returns the tool's description.
func (t *Tool) Description() string { return t.spec.Description }

// Spec returns the spec the tool was spawned from, with AllowedImports
// cleaned up (sorted, without duplicates).
func (t *Tool) Spec() GeneratedToolSpec { return t.spec }

// Timeout returns the timeout of one call: the spec's, bounded by the
// policy's.
func (t *Tool) Timeout() time.Duration { return t.timeout }

// Sandbox returns the sandbox the tool runs in.
func (t *Tool) Sandbox() *Sandbox { return t.factory.sb }

// InputSchema returns the tool's argument schema (a JSON Schema of type
// "object"; the shorthand form expanded).
func (t *Tool) InputSchema() json.RawMessage { return append(json.RawMessage(nil), t.schema.raw...) }

// ValidateArgs checks args (a JSON object; empty or null means {}) against
// the tool's schema and returns them in compact form. A mismatch is an
// *ArgumentError naming the offending argument.
func (t *Tool) ValidateArgs(args json.RawMessage) (json.RawMessage, error) {
	return t.schema.validate(t.spec.Name, args)
}

// Call validates args against the schema — nothing runs when they do not
// match (an *ArgumentError) — and then executes the implementation in the
// sandbox with the spec's imports and timeout. As with Sandbox.Execute, a
// failure of the user's code is in the result (Success false), and the
// error is reserved for bad arguments and infrastructure failures. It
// publishes tool.invocation_completed or tool.invocation_failed.
func (t *Tool) Call(ctx context.Context, args json.RawMessage) (shared.ExecutionResult, error) {
	return t.CallStream(ctx, args, nil)
}

// CallStream is Call with the implementation's stdout and stderr given to
// onChunk as it writes them (Sandbox.ExecuteStream; nil: none). The
// result holds the same bytes.
func (t *Tool) CallStream(ctx context.Context, args json.RawMessage, onChunk func(shared.OutputChunk)) (shared.ExecutionResult, error) {
	start := time.Now()
	sb := t.factory.sb
	fail := func(msg string) {
		t.factory.bus.Emit(EventInvocationFailed, sb.Name(), map[string]any{
			"tool_name": t.spec.Name, "error": msg, "duration_ms": msSince(start)})
	}
	valid, err := t.ValidateArgs(args)
	if err != nil {
		fail(err.Error())
		return shared.ExecutionResult{}, err
	}
	res, err := t.factory.executeStream(ctx, shared.ExecuteRequest{
		Code:           t.spec.Implementation,
		Args:           valid,
		AllowedImports: t.spec.AllowedImports,
		Timeout:        t.timeout,
		Stateless:      true, // a tool is a function: its calls share nothing, whatever the sandbox's default
	}, onChunk)
	switch {
	case err != nil:
		fail(err.Error())
		return res, fmt.Errorf("tool %q: %w", t.spec.Name, err)
	case !res.Success:
		fail((&ExecutionError{Result: res}).Error())
	default:
		t.factory.bus.Emit(EventInvocationCompleted, sb.Name(), map[string]any{
			"tool_name": t.spec.Name, "duration_ms": msSince(start)})
	}
	return res, nil
}

func msSince(t time.Time) float64 {
	return float64(time.Since(t).Microseconds()) / 1000
}

// cleanImports trims, sorts and de-duplicates module names.
func cleanImports(mods []string) []string {
	var out []string
	for _, m := range mods {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// importAllowed reports whether module m (or a parent package of it) is in
// the allowlist.
func importAllowed(m string, allow []string) bool {
	for {
		if slices.Contains(allow, m) {
			return true
		}
		i := strings.LastIndexByte(m, '.')
		if i < 0 {
			return false
		}
		m = m[:i]
	}
}

// compiledSchema is a tool's argument schema, resolved for validation.
type compiledSchema struct {
	raw      json.RawMessage
	schema   *jsonschema.Schema
	resolved *jsonschema.Resolved
	// perProp validates one top-level property at a time, so that an error
	// can name the argument.
	perProp map[string]*jsonschema.Resolved
}

// schemaKeywords mark a parameters object as a full JSON Schema rather than
// the shorthand map of name to schema.
var schemaKeywords = []string{"properties", "$ref", "$schema", "$defs", "definitions", "allOf", "anyOf", "oneOf", "additionalProperties", "patternProperties"}

var jsonTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

func isFullSchema(m map[string]any) bool {
	if t, ok := m["type"]; ok {
		switch t.(type) {
		case string, []any:
			return true
		}
	}
	if _, ok := m["required"].([]any); ok {
		return true
	}
	for _, k := range schemaKeywords {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// compileParameters turns the Parameters of a spec into a resolved schema.
func compileParameters(p any) (*compiledSchema, error) {
	var raw []byte
	switch v := p.(type) {
	case nil:
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case string:
		raw = []byte(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("cannot encode as JSON: %v", err)
		}
		raw = b
	}
	raw = bytes.TrimSpace(raw)
	var m map[string]any
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("must be a JSON object (a JSON Schema, or a map of parameter name to schema): %v", err)
		}
	}
	if m == nil {
		m = map[string]any{}
	}
	if !isFullSchema(m) {
		props := map[string]any{}
		required := make([]any, 0, len(m))
		for name, s := range m {
			switch sv := s.(type) {
			case map[string]any, bool:
				props[name] = sv
			case string:
				if !slices.Contains(jsonTypes, sv) {
					return nil, fmt.Errorf("parameter %q: %q is not a JSON type (one of %s) nor a schema object", name, sv, strings.Join(jsonTypes, ", "))
				}
				props[name] = map[string]any{"type": sv}
			default:
				return nil, fmt.Errorf("parameter %q: the schema must be an object such as {\"type\": \"string\"}, got %s", name, jsonKind(s))
			}
			required = append(required, name)
		}
		sort.Slice(required, func(i, j int) bool { return required[i].(string) < required[j].(string) })
		m = map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	}
	if _, ok := m["type"]; !ok {
		m["type"] = "object"
	}
	if err := checkTypes(m, ""); err != nil {
		return nil, err
	}
	if t, _ := m["type"].(string); t != "object" {
		return nil, fmt.Errorf(`must describe an object: the schema's "type" is %v, want "object" (arguments are always a JSON object)`, m["type"])
	}
	canon, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(canon, &s); err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %v", err)
	}
	rs, err := s.Resolve(&jsonschema.ResolveOptions{Loader: noRemoteRefs})
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema: %v", err)
	}
	cs := &compiledSchema{raw: canon, schema: &s, resolved: rs, perProp: map[string]*jsonschema.Resolved{}}
	for name := range s.Properties {
		c := s.CloneSchemas()
		one := &jsonschema.Schema{
			Schema:      c.Schema,
			ID:          c.ID,
			Defs:        c.Defs,
			Definitions: c.Definitions,
			Type:        "object",
			Properties:  map[string]*jsonschema.Schema{name: c.Properties[name]},
		}
		r, err := one.Resolve(&jsonschema.ResolveOptions{Loader: noRemoteRefs})
		if err != nil {
			return nil, fmt.Errorf("property %q: %v", name, err)
		}
		cs.perProp[name] = r
	}
	return cs, nil
}

func noRemoteRefs(uri *url.URL) (*jsonschema.Schema, error) {
	return nil, fmt.Errorf("remote $ref %q is not supported; put the definition under $defs", uri.String())
}

// checkTypes rejects a "type" that is not a JSON type anywhere in a schema
// (the resolver does not check it).
func checkTypes(v any, path string) error {
	switch x := v.(type) {
	case map[string]any:
		check := func(t any) error {
			s, ok := t.(string)
			if !ok || !slices.Contains(jsonTypes, s) {
				at := path
				if at == "" {
					at = "/"
				}
				return fmt.Errorf("at %s: %q is not a JSON Schema type (one of %s)", at, fmt.Sprint(t), strings.Join(jsonTypes, ", "))
			}
			return nil
		}
		switch t := x["type"].(type) {
		case nil:
		case []any:
			for _, e := range t {
				if err := check(e); err != nil {
					return err
				}
			}
		case string:
			if err := check(t); err != nil {
				return err
			}
		default:
			if _, isObj := t.(map[string]any); !isObj {
				return check(t)
			}
		}
		for k, sub := range x {
			switch k {
			case "default", "const", "enum", "examples":
				continue
			case "type":
				if _, isObj := sub.(map[string]any); !isObj {
					continue
				}
			}
			if err := checkTypes(sub, path+"/"+k); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := checkTypes(e, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

var validatingPrefix = regexp.MustCompile(`^validating ([^:]*): `)

// cleanSchemaError turns "validating root: validating /properties/n: type:
// ..." into the innermost message and the schema location it came from.
func cleanSchemaError(err error) (msg, at string) {
	msg = err.Error()
	for {
		m := validatingPrefix.FindStringSubmatch(msg)
		if m == nil {
			return msg, at
		}
		at = m[1]
		msg = msg[len(m[0]):]
	}
}

func (cs *compiledSchema) validate(tool string, raw json.RawMessage) (json.RawMessage, error) {
	bad := func(field, format string, a ...any) (json.RawMessage, error) {
		return nil, &ArgumentError{Tool: tool, Field: field, Message: fmt.Sprintf(format, a...)}
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = json.RawMessage("{}")
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return bad("", "not valid JSON: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return bad("", "the arguments must be a JSON object, got %s", jsonKind(v))
	}
	s := cs.schema
	var missing []string
	for _, r := range s.Required {
		if _, ok := obj[r]; !ok {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return bad(missing[0], "missing (required: %s)", strings.Join(s.Required, ", "))
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	if ap := s.AdditionalProperties; ap != nil && ap.Not != nil && len(s.PatternProperties) == 0 {
		for _, k := range names {
			if _, ok := s.Properties[k]; !ok {
				return bad(k, "unexpected argument; the tool takes %s", takes(s))
			}
		}
	}
	for _, k := range names {
		r, ok := cs.perProp[k]
		if !ok {
			continue
		}
		if err := r.Validate(map[string]any{k: obj[k]}); err != nil {
			msg, at := cleanSchemaError(err)
			if at != "" && at != "/properties/"+k && at != "root" {
				msg += " (schema " + at + ")"
			}
			return bad(k, "%s", msg)
		}
	}
	if err := cs.resolved.Validate(obj); err != nil {
		msg, at := cleanSchemaError(err)
		if at != "" && at != "root" {
			msg += " (schema " + at + ")"
		}
		return bad("", "%s", msg)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return bad("", "not valid JSON: %v", err)
	}
	return buf.Bytes(), nil
}

func takes(s *jsonschema.Schema) string {
	if len(s.Properties) == 0 {
		return "no arguments"
	}
	names := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// RunPythonToolName is the tool_name of the events RunPython publishes.
const RunPythonToolName = "run_python"

// RunPythonRequest is a one-off function body for ToolFactory.RunPython.
type RunPythonRequest struct {
	// Code is the body of a function receiving `args`.
	Code string
	// Args is the `args` object (empty or null means {}).
	Args json.RawMessage
	// AllowedImports are the modules the code may import besides the
	// policy's allowed_imports; they must lie within the policy's ceiling.
	AllowedImports []string
	// Timeout bounds the run; zero means the policy's. One above the
	// policy's ceiling is refused (a *PolicyError).
	Timeout time.Duration
	// Dependencies are packages to install before the code runs
	// (shared.ExecuteRequest.Dependencies): within the policy's
	// allowed_packages, on a backend with the dependencies capability.
	Dependencies []string
	// Stateful runs it in the caller's session interpreter, whose globals
	// persist across stateful runs (shared.ExecuteRequest.Stateful): the
	// factory needs a session (RunAs) and the sandbox the
	// "stateful_sessions" capability, else Execute refuses it.
	Stateful bool
	// Stateless asks for a fresh process where the sandbox's default is
	// stateful (shared.ExecuteRequest.Stateless); neither: the default.
	Stateless bool
	// OnOutput, when set, gets the code's stdout and stderr as it writes
	// them (Sandbox.ExecuteStream); the result holds the same bytes.
	OnOutput func(shared.OutputChunk)
	// SessionID, when set, runs the code in this open session of the
	// factory's user instead of the session RunAs gives (a server that
	// keeps several named sessions per client picks one per call).
	SessionID string
}

// RunPython runs a one-off function body under the sandbox's policy (its
// allowed_imports and those the request lists, within the policy's
// ceiling; a timeout within its ceiling) without registering a tool: the run_python
// tool of the MCP server. A request that breaks those rules is an
// *ArgumentError (Tool "run_python"); code the static checks reject is a
// result with ErrorKind "validation" and its Findings, which also publishes
// sandbox.validation_rejected. Like Tool.Call it publishes
// tool.invocation_completed or tool.invocation_failed, with tool_name
// "run_python".
func (f *ToolFactory) RunPython(ctx context.Context, req RunPythonRequest) (shared.ExecutionResult, error) {
	start := time.Now()
	sb := f.sb
	name := sb.Name()
	fail := func(msg string) {
		f.bus.Emit(EventInvocationFailed, name, map[string]any{
			"tool_name": RunPythonToolName, "error": msg, "duration_ms": msSince(start)})
	}
	bad := func(field, format string, a ...any) (shared.ExecutionResult, error) {
		err := &ArgumentError{Tool: RunPythonToolName, Field: field, Message: fmt.Sprintf(format, a...)}
		fail(err.Error())
		return shared.ExecutionResult{}, err
	}
	if strings.TrimSpace(req.Code) == "" {
		return bad("code", "empty")
	}
	if req.Timeout < 0 {
		return bad("timeout", "must not be negative (got %s)", req.Timeout)
	}
	pol := sb.Policy()
	imports := cleanImports(req.AllowedImports)
	ceiling := pol.Allowed(f.trusted...)
	for _, m := range imports {
		if !importAllowed(m, ceiling) {
			allowed := "none"
			if len(pol.AllowedImports) > 0 {
				allowed = strings.Join(pol.AllowedImports, ", ")
			}
			err := &ArgumentError{Tool: RunPythonToolName, Field: "allowed_imports", Message: fmt.Sprintf("module %q is not allowed by policy %q of sandbox %q (its allowed_imports: %s)", m, pol.Name, name, allowed)}
			fail(err.Error())
			return shared.ExecutionResult{}, &PolicyError{Policy: pol.Name, Err: err} // the policy refused it (StageOf)
		}
	}
	// A timeout above the policy's ceiling is refused by Execute, as on
	// the CLI and in the Go API (a policy-stage error naming the ceiling),
	// not cut to fit without a word.
	timeout := req.Timeout
	if timeout == 0 {
		timeout = pol.Timeout
	}
	var res shared.ExecutionResult
	var err error
	ereq := shared.ExecuteRequest{Code: req.Code, Args: req.Args, AllowedImports: imports, Timeout: timeout, Dependencies: req.Dependencies, UserID: f.user, Stateful: req.Stateful, Stateless: req.Stateless, SessionID: req.SessionID}
	if fs := CheckCode(ctx, sb.host.opts.checker, Policy{Name: pol.Name, MaxCodeBytes: pol.MaxCodeBytes, Classes: pol.Classes, AllowedImports: pol.AllowedImports}, req.Code, imports...); len(fs) > 0 {
		// Rejected under the policy's imports and the request's, as the
		// sandbox would, before Execute: observed (metrics, span, log
		// line, audit) as an execution too.
		res, err = sb.observeExecute(ctx, ereq, func(context.Context, *execObservation) (shared.ExecutionResult, error) {
			// The limits it would have run with.
			p, err := shared.Prepare(shared.ExecuteRequest{Timeout: timeout}, pol.limits())
			return shared.Rejected(fs, p.Limits()), err
		})
	} else {
		res, err = f.executeStream(ctx, ereq, req.OnOutput)
	}
	switch {
	case err != nil:
		fail(err.Error())
		if errors.Is(err, shared.ErrInvalidArgument) {
			field := ""
			if fe := (*shared.FieldError)(nil); errors.As(err, &fe) {
				field = fe.Field
			}
			ae := &ArgumentError{Tool: RunPythonToolName, Field: field, Message: err.Error()}
			if pe := (*PolicyError)(nil); errors.As(err, &pe) {
				return res, &PolicyError{Policy: pe.Policy, Err: ae} // the policy's refusal stays one (StageOf)
			}
			return res, ae
		}
		return res, fmt.Errorf("%s: %w", RunPythonToolName, err)
	case res.ErrorKind == shared.KindValidation:
		f.bus.Emit(EventValidationRejected, name, map[string]any{"tool_name": RunPythonToolName, "reason": res.Error})
		fail(res.Error)
	case !res.Success:
		fail((&ExecutionError{Result: res}).Error())
	default:
		f.bus.Emit(EventInvocationCompleted, name, map[string]any{
			"tool_name": RunPythonToolName, "duration_ms": msSince(start)})
	}
	return res, nil
}

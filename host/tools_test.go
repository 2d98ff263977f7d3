package host

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/orqest/sandbox/shared"
)

const toolsPolicy = `
policy "default" {
  allowed_imports = ["re", "math"]
  timeout         = "3s"
}
sandbox "tier1" {
  plugin = "subprocess"
}
`

// doiSpec is a DOI extractor, with the shorthand parameters.
func doiSpec() GeneratedToolSpec {
	return GeneratedToolSpec{
		Name:        "extract_dois",
		Description: "Extract DOIs from a text blob.",
		Parameters:  map[string]any{"text": map[string]any{"type": "string"}},
		Implementation: "import re\n" +
			"return {'dois': re.findall(r'10\\.\\d{4,}/[\\w.\\-/]+', args['text'])}\n",
		AllowedImports: []string{"re"},
		Timeout:        2 * time.Second,
	}
}

func newFactory(t *testing.T) (*ToolFactory, *Subscription) {
	t.Helper()
	h := newHost(t, toolsPolicy)
	sub := h.Bus().Subscribe(64)
	t.Cleanup(sub.Close)
	return NewToolFactory(defaultSandbox(t, h), h.Bus()), sub
}

// next receives the next event of sub or fails.
func next(t *testing.T, sub *Subscription) Event {
	t.Helper()
	select {
	case ev := <-sub.C:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

func TestToolSpawnAndCall(t *testing.T) {
	f, sub := newFactory(t)
	ctx := context.Background()
	tool, err := f.Spawn(ctx, doiSpec())
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, sub); ev.Type != EventToolSpawned || ev.ToolName() != "extract_dois" || ev.Sandbox != "tier1" || ev.Seq == 0 {
		t.Fatalf("event %+v", ev)
	}
	if got, ok := f.Tool("extract_dois"); !ok || got != tool {
		t.Fatal("factory does not know the tool")
	}
	var schema map[string]any
	if err := json.Unmarshal(tool.InputSchema(), &schema); err != nil || schema["type"] != "object" {
		t.Fatalf("schema %s: %v", tool.InputSchema(), err)
	}

	res, err := tool.Call(ctx, json.RawMessage(`{"text": "see 10.1000/xyz123 and 10.5555/abc.def"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Success || string(res.Output) != `{"dois":["10.1000/xyz123","10.5555/abc.def"]}` {
		t.Fatalf("result %+v", res)
	}
	ev := next(t, sub)
	if ev.Type != EventInvocationCompleted || ev.ToolName() != "extract_dois" {
		t.Fatalf("event %+v", ev)
	}
	if d, ok := ev.Payload["duration_ms"].(float64); !ok || d <= 0 {
		t.Fatalf("duration_ms %v", ev.Payload["duration_ms"])
	}

	// User-code failure: in the result, not the error, and an
	// invocation_failed event with the error.
	boom, err := f.Spawn(ctx, GeneratedToolSpec{Name: "boom", Implementation: "return 1 // 0"})
	if err != nil {
		t.Fatal(err)
	}
	next(t, sub)
	res, err = boom.Call(ctx, nil)
	if err != nil || res.Success || res.ErrorKind != shared.KindRuntime {
		t.Fatalf("boom: %+v %v", res, err)
	}
	ev = next(t, sub)
	if ev.Type != EventInvocationFailed || !strings.Contains(ev.Payload["error"].(string), "ZeroDivisionError") {
		t.Fatalf("event %+v", ev)
	}
	if _, ok := ev.Payload["duration_ms"].(float64); !ok {
		t.Fatalf("no duration_ms in %+v", ev)
	}
}

func TestToolCallBadArgs(t *testing.T) {
	f, sub := newFactory(t)
	ctx := context.Background()
	tool, err := f.Spawn(ctx, doiSpec())
	if err != nil {
		t.Fatal(err)
	}
	next(t, sub)
	for _, c := range []struct {
		args, field, want string
	}{
		{`{"text": 5}`, "text", `want "string"`},
		{`{}`, "text", "missing"},
		{`{"text": "x", "txt": "y"}`, "txt", "unexpected argument; the tool takes text"},
		{`[1, 2]`, "", "must be a JSON object, got an array"},
		{`{"text": `, "", "not valid JSON"},
	} {
		res, err := tool.Call(ctx, json.RawMessage(c.args))
		var ae *ArgumentError
		if !errors.As(err, &ae) || !errors.Is(err, shared.ErrInvalidArgument) {
			t.Fatalf("%s: error %v", c.args, err)
		}
		if ae.Field != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: field %q, error %q; want field %q and %q", c.args, ae.Field, err, c.field, c.want)
		}
		if c.field != "" && !strings.Contains(err.Error(), `argument "`+c.field+`"`) {
			t.Errorf("%s: %q does not name the field", c.args, err)
		}
		if res.DurationMS != 0 || res.Success {
			t.Errorf("%s: something ran: %+v", c.args, res)
		}
		if ev := next(t, sub); ev.Type != EventInvocationFailed || ev.Payload["error"] != err.Error() {
			t.Errorf("%s: event %+v", c.args, ev)
		}
	}
}

func TestToolFullSchema(t *testing.T) {
	f, _ := newFactory(t)
	ctx := context.Background()
	tool, err := f.Spawn(ctx, GeneratedToolSpec{
		Name: "stats",
		Parameters: json.RawMessage(`{
			"type": "object",
			"properties": {
				"values": {"type": "array", "items": {"$ref": "#/$defs/num"}, "minItems": 1},
				"mode": {"enum": ["mean", "max"]},
				"digits": {"type": "integer", "minimum": 0, "maximum": 6}
			},
			"required": ["values"],
			"$defs": {"num": {"type": "number"}}
		}`),
		Implementation: "import math\n" +
			"v = args['values']\n" +
			"r = max(v) if args.get('mode') == 'max' else math.fsum(v) / len(v)\n" +
			"return round(r, args.get('digits', 2))\n",
		AllowedImports: []string{"math"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tool.Call(ctx, json.RawMessage(`{"values": [1, 2, 4], "extra": true}`))
	if err != nil || !res.Success || string(res.Output) != "2.33" {
		t.Fatalf("call: %+v %v", res, err)
	}
	for _, c := range []struct{ args, field, want string }{
		{`{"values": [1, "x"]}`, "values", `want "number"`},
		{`{"values": []}`, "values", "minItems"},
		{`{"values": [1], "mode": "median"}`, "mode", "enum"},
		{`{"values": [1], "digits": 1.5}`, "digits", `want "integer"`},
		{`{"values": [1], "digits": 9}`, "digits", "maximum"},
	} {
		_, err := tool.Call(ctx, json.RawMessage(c.args))
		var ae *ArgumentError
		if !errors.As(err, &ae) || ae.Field != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (field %q); want field %q, %q", c.args, err, fieldOf(err), c.field, c.want)
		}
	}
}

func fieldOf(err error) string {
	var ae *ArgumentError
	if errors.As(err, &ae) {
		return ae.Field
	}
	return "<not an ArgumentError>"
}

func TestToolSpawnRejected(t *testing.T) {
	f, sub := newFactory(t)
	ctx := context.Background()

	// The validator rejects the implementation: a SpawnError naming the
	// rule, and both events.
	spec := doiSpec()
	spec.Name = "evil"
	spec.Implementation = "return eval(args['text'])"
	_, err := f.Spawn(ctx, spec)
	var se *SpawnError
	if !errors.As(err, &se) || !errors.Is(err, shared.ErrValidation) || !strings.Contains(se.Reason, "forbidden-builtin") {
		t.Fatalf("error %v", err)
	}
	if ev := next(t, sub); ev.Type != EventToolSpawnFailed || ev.ToolName() != "evil" || ev.Payload["reason"] != se.Reason {
		t.Fatalf("event %+v", ev)
	}
	if ev := next(t, sub); ev.Type != EventValidationRejected || ev.Payload["reason"] != se.Reason {
		t.Fatalf("event %+v", ev)
	}
	if _, ok := f.Tool("evil"); ok {
		t.Fatal("rejected tool registered")
	}

	// A spec narrows the policy: math is allowed by policy but not by
	// the spec.
	spec = doiSpec()
	spec.Name = "narrow"
	spec.Implementation = "import math\nreturn math.pi"
	spec.AllowedImports = []string{"re"}
	if _, err := f.Spawn(ctx, spec); !errors.Is(err, shared.ErrValidation) || !strings.Contains(err.Error(), "import-not-allowed") {
		t.Fatalf("narrowed import: %v", err)
	}
	next(t, sub)
	next(t, sub)

	// Spec errors: a SpawnError wrapping ErrInvalidArgument, and only
	// tool.spawn_failed.
	for _, c := range []struct {
		mutate func(*GeneratedToolSpec)
		want   string
	}{
		{func(s *GeneratedToolSpec) { s.Name = "" }, "name is empty"},
		{func(s *GeneratedToolSpec) { s.Name = "1st" }, "is not valid"},
		{func(s *GeneratedToolSpec) { s.Name = "has-dash" }, "is not valid"},
		{func(s *GeneratedToolSpec) { s.Name = strings.Repeat("a", 65) }, "at most 64"},
		{func(s *GeneratedToolSpec) { s.Implementation = "  " }, "implementation is empty"},
		{func(s *GeneratedToolSpec) { s.AllowedImports = []string{"os"} }, `module "os" is not allowed by policy "default"`},
		{func(s *GeneratedToolSpec) { s.Parameters = json.RawMessage(`{"type": "string"}`) }, `want "object"`},
		{func(s *GeneratedToolSpec) { s.Parameters = json.RawMessage(`{"type": "objekt"}`) }, `"objekt" is not a JSON Schema type`},
		{func(s *GeneratedToolSpec) { s.Parameters = `{"text": 5}` }, `parameter "text"`},
		{func(s *GeneratedToolSpec) { s.Parameters = `[1]` }, "must be a JSON object"},
		{func(s *GeneratedToolSpec) {
			s.Parameters = `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`
		}, "remote $ref"},
		{func(s *GeneratedToolSpec) { s.Parameters = `{"properties":{"a":{"pattern":"("}}}` }, "pattern"},
		{func(s *GeneratedToolSpec) { s.Timeout = -time.Second }, "negative"},
	} {
		s := doiSpec()
		c.mutate(&s)
		_, err := f.Spawn(ctx, s)
		if !errors.As(err, &se) || !errors.Is(err, shared.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want %q, got %v", c.want, err)
		}
		if ev := next(t, sub); ev.Type != EventToolSpawnFailed || ev.Payload["reason"] != se.Reason {
			t.Errorf("event %+v", ev)
		}
	}
	select {
	case ev := <-sub.C:
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

func TestToolTimeoutBoundedByPolicy(t *testing.T) {
	f, _ := newFactory(t)
	ctx := context.Background()
	s := GeneratedToolSpec{Name: "slow", Implementation: "while True:\n    pass", Timeout: time.Hour}
	tool, err := f.Spawn(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if tool.Timeout() != 3*time.Second {
		t.Fatalf("timeout %s, want the policy's 3s", tool.Timeout())
	}
	s.Timeout = 300 * time.Millisecond
	tool, err = f.Spawn(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tool.Call(ctx, nil)
	if err != nil || res.Success || res.ErrorKind != shared.KindTimeout {
		t.Fatalf("result %+v %v", res, err)
	}
}

func TestToolFactoryWithoutBus(t *testing.T) {
	h := newHost(t, toolsPolicy)
	f := NewToolFactory(defaultSandbox(t, h), nil, WithReservedNames("run_python"))
	ctx := context.Background()
	tool, err := f.Spawn(ctx, GeneratedToolSpec{Name: "add", Parameters: `{"a":"number","b":"number"}`, Implementation: "return args['a'] + args['b']"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tool.Call(ctx, json.RawMessage(`{"a": 2, "b": 3.5}`))
	if err != nil || string(res.Output) != "5.5" {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := f.Spawn(ctx, GeneratedToolSpec{Name: "run_python", Implementation: "return 1"}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("reserved name: %v", err)
	}
	if len(f.Tools()) != 1 || !f.Remove("add") || f.Remove("add") {
		t.Fatal("registry")
	}
}

func TestCompileParameters(t *testing.T) {
	for _, c := range []struct {
		in   any
		want string
	}{
		{nil, `{"additionalProperties":false,"properties":{},"required":[],"type":"object"}`},
		{map[string]any{"text": map[string]any{"type": "string"}}, `{"additionalProperties":false,"properties":{"text":{"type":"string"}},"required":["text"],"type":"object"}`},
		{`{"b":"integer","a":{"type":"string"}}`, `{"additionalProperties":false,"properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"],"type":"object"}`},
		// A property literally called "type" in the shorthand.
		{`{"type":{"type":"string"}}`, `{"additionalProperties":false,"properties":{"type":{"type":"string"}},"required":["type"],"type":"object"}`},
		// A full schema without "type" gets type object.
		{`{"properties":{"x":{"type":"number"}}}`, `{"properties":{"x":{"type":"number"}},"type":"object"}`},
	} {
		cs, err := compileParameters(c.in)
		if err != nil {
			t.Errorf("%v: %v", c.in, err)
			continue
		}
		if string(cs.raw) != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.in, cs.raw, c.want)
		}
	}
	if _, err := compileParameters(`{"properties":{"type":{"type":"strang"}}}`); err == nil || !strings.Contains(err.Error(), "strang") {
		t.Errorf("nested bad type: %v", err)
	}
}

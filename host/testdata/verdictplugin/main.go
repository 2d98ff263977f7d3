// Command verdictplugin is a test backend that runs no code: its Execute
// answers {"verdict": <a verdict came with the request>, "trusted": <a
// validator of its own trusts it for the request>}, under the classes its
// Configure was given.
package main

import (
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
	"github.com/orqest/sandbox/validator"
)

type backend struct {
	shared.NoSessions
	v       *validator.Validator
	classes *atomic.Bool
}

func (backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	return shared.InfoResponse{Name: "verdict", Tier: 3, Version: "0.0.1", APIVersions: []int{shared.APIVersion},
		Capabilities: []shared.Capability{shared.CapFreshProcess}}, nil
}

func (b backend) Configure(_ context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	b.classes.Store(req.Classes)
	return shared.ConfigureResponse{}, nil
}

func (backend) Validate(context.Context, shared.ValidateRequest) (shared.ValidateResponse, error) {
	return shared.ValidateResponse{}, nil
}

func (b backend) Execute(_ context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	out, err := json.Marshal(map[string]bool{
		"verdict": req.Verdict != nil,
		"trusted": b.v.Trusts(req.Verdict, req.Code, req.AllowedImports, validator.Features{Classes: b.classes.Load()}),
	})
	if err != nil {
		return shared.ExecuteResponse{}, err
	}
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true, Output: out}}, nil
}

func main() {
	plugin.Serve(backend{v: validator.New(), classes: new(atomic.Bool)}, plugin.WithLogger(plugin.NewPluginLogger("verdict")))
}

// Command noopplugin is a test backend that runs no code: its Execute
// answers success with output 1 at once. BenchmarkStageBudget calls it
// through the host to measure the host and the go-plugin round trip
// without a backend behind them.
package main

import (
	"context"
	"encoding/json"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

type backend struct{ shared.NoSessions }

func (backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	return shared.InfoResponse{Name: "noop", Tier: 3, Version: "0.0.1", APIVersions: []int{shared.APIVersion},
		Capabilities: []shared.Capability{shared.CapFreshProcess}}, nil
}

func (backend) Configure(context.Context, shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	return shared.ConfigureResponse{}, nil
}

func (backend) Validate(context.Context, shared.ValidateRequest) (shared.ValidateResponse, error) {
	return shared.ValidateResponse{}, nil
}

func (backend) Execute(context.Context, shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true, Output: json.RawMessage("1")}}, nil
}

func main() {
	plugin.Serve(backend{}, plugin.WithLogger(plugin.NewPluginLogger("noop")))
}

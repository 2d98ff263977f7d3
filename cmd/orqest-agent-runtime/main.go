// Command orqest-agent-runtime is the agent runtime that docker containers,
// gVisor sandboxes and kubernetes pods run as their main process: an MCP
// server over its stdio (or HTTP with -listen) that runs generated Python.
// It is a static binary (CGO_ENABLED=0, `make runtime`); see package
// github.com/orqest/sandbox/agent.
package main

import (
	"os"

	"github.com/orqest/sandbox/agent"
)

func main() { os.Exit(agent.Main(os.Args[1:])) }

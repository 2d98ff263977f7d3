package main

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/conformance"
)

// TestConformance proves the backend honours the orqest-sandbox contract:
// the shared suite runs against it in-process and over the real go-plugin
// gRPC path. Cases that need a capability pyexec does not declare are skipped
// with a message naming it.
func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) shared.Sandbox {
		return NewBackend(hclog.NewNullLogger())
	})
}

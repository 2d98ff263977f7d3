// Package proto is the generated gRPC code of sandbox.proto, the wire format
// of the plugin contract that package shared/plugin's adapters speak (make
// proto regenerates it). Plugin authors implement shared.Sandbox instead.
package proto

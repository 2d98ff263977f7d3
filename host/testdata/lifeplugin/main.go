// Command lifeplugin is a test backend for the host's plugin lifecycle
// tests (lifecycle_test.go): no Python runs. $ORQEST_TEST_LIFE says how it
// misbehaves at launch:
//
//	hang         never answers the handshake; a child in its process
//	             group (sleep) holds its stdout and stderr
//	hang-setsid  the same with the child in a session of its own, outside
//	             the plugin's process group
//	garbage      writes a line that is no handshake, then hangs as above
//	info-hang    answers the handshake, then never answers Info
//	(unset)      a working backend
//
// $ORQEST_TEST_LIFE_PIDS, when set, is a file the plugin appends the pids
// of the children it starts to (one a line), so a test can check that they
// are gone and end them if not.
//
// Execute reads its code as a command:
//
//	pid    the plugin's process id
//	work   append args.id to the file $ORQEST_TEST_LIFE_RUNS (one line
//	       a run, written before the work), wait args.ms milliseconds,
//	       then return args.id: a test counts how often each call ran
//	sleep  wait for args.ms milliseconds, then succeed; with args.ctx the
//	       wait ends early, with the context's error, when the call's
//	       context does (without it the plugin ignores its context and
//	       its timeout, as a broken backend would); with args.exit the
//	       plugin process exits after the wait instead of answering
//
// Configure refuses a config whose flavour is "sour", naming the
// attribute (a shared.FieldError), and one whose colour is "none" without
// naming it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

type backend struct {
	shared.NoSessions
}

func (backend) Info(context.Context, shared.InfoRequest) (shared.InfoResponse, error) {
	if os.Getenv("ORQEST_TEST_LIFE") == "info-hang" {
		time.Sleep(time.Hour) // ignores its context, as a wedged plugin does
	}
	return shared.InfoResponse{Name: "life", Tier: 1, Version: "0.0.1", APIVersions: []int{shared.APIVersion},
		Capabilities: []shared.Capability{shared.CapWallClockTimeout, shared.CapFreshProcess},
		ConfigSchema: []shared.ConfigAttribute{
			{Name: "flavour", Type: "string"},
			{Name: "colour", Type: "string"},
		}}, nil
}

func (backend) Configure(_ context.Context, req shared.ConfigureRequest) (shared.ConfigureResponse, error) {
	var cfg struct {
		Flavour string `json:"flavour"`
		Colour  string `json:"colour"`
	}
	if len(req.Config) > 0 {
		if err := json.Unmarshal(req.Config, &cfg); err != nil {
			return shared.ConfigureResponse{}, fmt.Errorf("life config: %v: %w", err, shared.ErrInvalidArgument)
		}
	}
	if cfg.Flavour == "sour" {
		return shared.ConfigureResponse{}, fmt.Errorf("life config: %w", &shared.FieldError{Field: "flavour", Reason: `"sour" is not a flavour this backend serves`})
	}
	if cfg.Colour == "none" {
		return shared.ConfigureResponse{}, fmt.Errorf("life config: no colour: %w", shared.ErrInvalidArgument)
	}
	return shared.ConfigureResponse{}, nil
}

func (backend) Validate(context.Context, shared.ValidateRequest) (shared.ValidateResponse, error) {
	return shared.ValidateResponse{}, nil
}

func (backend) Execute(ctx context.Context, req shared.ExecuteRequest) (shared.ExecuteResponse, error) {
	var out any
	switch req.Code {
	case "pid":
		out = os.Getpid()
	case "work":
		var args struct {
			ID string `json:"id"`
			MS int    `json:"ms"`
		}
		if err := json.Unmarshal(req.Args, &args); err != nil || args.ID == "" {
			return shared.ExecuteResponse{}, fmt.Errorf("work wants args {id, ms}: %w", shared.ErrInvalidArgument)
		}
		if f := os.Getenv("ORQEST_TEST_LIFE_RUNS"); f != "" {
			fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
			if err != nil {
				return shared.ExecuteResponse{}, fmt.Errorf("work: %v: %w", err, shared.ErrInternal)
			}
			fmt.Fprintln(fh, args.ID) // one write of a short line: O_APPEND keeps lines whole
			fh.Close()
		}
		select {
		case <-time.After(time.Duration(args.MS) * time.Millisecond):
		case <-ctx.Done():
			return shared.ExecuteResponse{}, fmt.Errorf("work: %w", ctx.Err())
		}
		out = args.ID
	case "sleep":
		var args struct {
			MS   int  `json:"ms"`
			Ctx  bool `json:"ctx"`
			Exit bool `json:"exit"`
		}
		_ = json.Unmarshal(req.Args, &args)
		d := time.Duration(args.MS) * time.Millisecond
		if !args.Ctx {
			time.Sleep(d)
			if args.Exit {
				os.Exit(3)
			}
			break
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return shared.ExecuteResponse{}, fmt.Errorf("sleep: %w", ctx.Err())
		}
	default:
		return shared.ExecuteResponse{}, fmt.Errorf("unknown command %q: %w", req.Code, shared.ErrInvalidArgument)
	}
	raw, _ := json.Marshal(out)
	return shared.ExecuteResponse{Result: shared.ExecutionResult{Success: true, Output: raw}}, nil
}

// hang starts a child that holds the plugin's stdout and stderr (in a
// session of its own when setsid), records its pid, writes line on stdout
// when it is not empty, and never returns.
func hang(setsid bool, line string) {
	child := exec.Command("/bin/sleep", "600")
	child.Stdout, child.Stderr = os.Stdout, os.Stderr
	if setsid {
		child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "lifeplugin: start the child:", err)
		os.Exit(1)
	}
	if f := os.Getenv("ORQEST_TEST_LIFE_PIDS"); f != "" {
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			fmt.Fprintln(fh, strconv.Itoa(child.Process.Pid))
			fh.Close()
		}
	}
	if line != "" {
		fmt.Println(line)
	}
	time.Sleep(time.Hour)
	os.Exit(1)
}

func main() {
	switch os.Getenv("ORQEST_TEST_LIFE") {
	case "hang":
		hang(false, "")
	case "hang-setsid":
		hang(true, "")
	case "garbage":
		hang(false, "this is no handshake")
	}
	plugin.Serve(backend{}, plugin.WithLogger(plugin.NewPluginLogger("life")))
}

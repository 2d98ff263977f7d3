package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgomcp "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Interoperability of `mcp serve` (the real binary, tier 1) with MCP
// clients nobody here wrote: mcp-go's and the official Go SDK's, each on
// every protocol version it offers, over stdio and Streamable HTTP. Each
// connection initializes, lists the tools, and calls run_python once
// successfully and once with an error a model can fix; the version the
// connection settles on is the one the specification's lifecycle asks
// for: the client's when the server speaks it on that transport, else the
// server's newest there.

const interopToken = "0123456789abcdef0123456789abcdef"

// interopDir is a directory whose config.hcl is mcpPolicy (tier 1, the
// subprocess plugin), with a token file for --http.
func interopDir(t *testing.T) (dir, tokenFile string) {
	t.Helper()
	needPlugin(t)
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.hcl"), []byte(mcpPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile = filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokenFile, []byte("interop "+interopToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, tokenFile
}

// The protocol versions the server speaks, newest first: over stdio every
// version the SDK knows; over HTTP (a transport that keeps sessions) the
// revisions of the initialize handshake, which stop at 2025-11-25.
var (
	stdioVersions = mcp.SupportedProtocolVersions()
	httpVersions  = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}
)

// negotiated is the version the lifecycle says a connection asking for
// asked settles on with a server speaking served: asked if served holds
// it, else the newest served.
func negotiated(asked string, served []string) string {
	if slices.Contains(served, asked) {
		return asked
	}
	return served[0]
}

// The server's HTTP versions are what the test expects them to be: no
// version of the sessionless core, and the SDK's newest handshake
// revision.
func TestInteropHTTPVersions(t *testing.T) {
	if got := statefulHTTPProtocolVersions(); !slices.Equal(got, httpVersions) {
		t.Fatalf("HTTP versions %v, want %v", got, httpVersions)
	}
	if !slices.Contains(stdioVersions, "2026-07-28") || !slices.Contains(mcpgomcp.ValidProtocolVersions, "2026-07-28") {
		t.Fatalf("stdio versions %v, mcp-go's %v: the sessionless core is not covered", stdioVersions, mcpgomcp.ValidProtocolVersions)
	}
}

// interopCase is one connection: a client asking for a version ("" for
// its default, its newest).
type interopCase struct {
	name  string
	asked string
}

// mcpGoCases is every protocol version mcp-go offers, and its default.
func mcpGoCases() []interopCase {
	cs := []interopCase{{"default", ""}}
	for _, v := range mcpgomcp.ValidProtocolVersions {
		cs = append(cs, interopCase{v, v})
	}
	return cs
}

// sdkCases is every protocol version the Go SDK's client offers, and its
// default.
func sdkCases() []interopCase {
	cs := []interopCase{{"default", ""}}
	for _, v := range mcp.SupportedProtocolVersions() {
		cs = append(cs, interopCase{v, v})
	}
	return cs
}

// interopCtx bounds one connection's exchange.
func interopCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// The two run_python calls: one that succeeds, one whose error tells the
// model what to fix.
var (
	interopOK = map[string]any{
		"code": "import math\nreturn {'r': math.floor(args['x'])}", "args": map[string]any{"x": 2.7},
		"allowed_imports": []string{"math"},
	}
	interopOKWant  = `{"r":2}`
	interopBad     = map[string]any{"code": "import json\nreturn 1"} // json is in neither the policy nor the call
	interopBadWant = "import-not-allowed"
)

// checkTools reports names lacking the built-in tools.
func checkTools(t *testing.T, names []string) {
	t.Helper()
	if !slices.Contains(names, mcpRunPython) || !slices.Contains(names, mcpSpawnTool) {
		t.Errorf("tools %v, want %s and %s among them", names, mcpRunPython, mcpSpawnTool)
	}
}

// exerciseMCPGo initializes c asking for asked and checks the negotiated
// version is want, then lists the tools and calls run_python.
func exerciseMCPGo(t *testing.T, c *mcpgo.Client, asked, want string) {
	t.Helper()
	ctx := interopCtx(t)
	var req mcpgomcp.InitializeRequest
	req.Params.ProtocolVersion = asked
	req.Params.ClientInfo = mcpgomcp.Implementation{Name: "mcp-go-interop", Version: "1"}
	init, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize asking for %q: %v", asked, err)
	}
	if init.ProtocolVersion != want || c.ProtocolVersion() != want {
		t.Errorf("asking for %q: initialize says %q, the client uses %q; want %q", asked, init.ProtocolVersion, c.ProtocolVersion(), want)
	}
	if init.ServerInfo.Name != "orqest-sandbox" {
		t.Errorf("server info %+v", init.ServerInfo)
	}
	tools, err := c.ListTools(ctx, mcpgomcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	checkTools(t, names)
	run := func(args map[string]any) (bool, string) {
		t.Helper()
		var r mcpgomcp.CallToolRequest
		r.Params.Name = mcpRunPython
		r.Params.Arguments = args
		res, err := c.CallTool(ctx, r)
		if err != nil {
			t.Fatalf("run_python %v: protocol error %v", args, err)
		}
		if len(res.Content) == 0 {
			return res.IsError, ""
		}
		tc, _ := mcpgomcp.AsTextContent(res.Content[0])
		if tc == nil {
			return res.IsError, ""
		}
		return res.IsError, tc.Text
	}
	if isErr, out := run(interopOK); isErr || out != interopOKWant {
		t.Errorf("run_python: isError=%v %q, want %q", isErr, out, interopOKWant)
	}
	if isErr, out := run(interopBad); !isErr || !strings.Contains(out, interopBadWant) {
		t.Errorf("run_python importing an unlisted module: isError=%v %q, want an error naming %s", isErr, out, interopBadWant)
	}
}

// exerciseSDK checks an SDK client session like exerciseMCPGo.
func exerciseSDK(t *testing.T, cs *mcp.ClientSession, asked, want string) {
	t.Helper()
	init := cs.InitializeResult()
	if init == nil || init.ProtocolVersion != want {
		t.Errorf("asking for %q: initialize result %+v, want version %q", asked, init, want)
	}
	if init != nil && (init.ServerInfo == nil || init.ServerInfo.Name != "orqest-sandbox") {
		t.Errorf("server info %+v", init.ServerInfo)
	}
	checkTools(t, toolNames(t, cs))
	if r := call(t, cs, mcpRunPython, interopOK); r.IsError || text(r) != interopOKWant {
		t.Errorf("run_python: isError=%v %q, want %q", r.IsError, text(r), interopOKWant)
	}
	if r := call(t, cs, mcpRunPython, interopBad); !r.IsError || !strings.Contains(text(r), interopBadWant) {
		t.Errorf("run_python importing an unlisted module: isError=%v %q, want an error naming %s", r.IsError, text(r), interopBadWant)
	}
}

// serveCommand is `mcp serve` over stdio in dir.
func serveCommand(ctx context.Context, dir string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, cli, "mcp", "serve")
	cmd.Dir = dir
	return cmd
}

func TestInteropMCPGoHTTP(t *testing.T) {
	dir, tokenFile := interopDir(t)
	url := startServer(t, dir, "--token-file", tokenFile)
	for _, c := range mcpGoCases() {
		t.Run(c.name, func(t *testing.T) {
			var opts []mcpgo.ClientOption
			if c.asked != "" {
				opts = append(opts, mcpgo.WithProtocolVersion(c.asked))
			}
			tr, err := mcpgotransport.NewStreamableHTTP(url, mcpgotransport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + interopToken}))
			if err != nil {
				t.Fatal(err)
			}
			cl := mcpgo.NewClient(tr, opts...)
			if err := cl.Start(interopCtx(t)); err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			asked := c.asked
			if asked == "" {
				asked = mcpgomcp.LATEST_PROTOCOL_VERSION
			}
			exerciseMCPGo(t, cl, c.asked, negotiated(asked, httpVersions))
		})
	}
}

func TestInteropMCPGoStdio(t *testing.T) {
	dir, _ := interopDir(t)
	for _, c := range mcpGoCases() {
		t.Run(c.name, func(t *testing.T) {
			var opts []mcpgo.ClientOption
			if c.asked != "" {
				opts = append(opts, mcpgo.WithProtocolVersion(c.asked))
			}
			tr := mcpgotransport.NewStdioWithOptions(cli, nil, nil,
				mcpgotransport.WithCommandFunc(func(ctx context.Context, _ string, _, _ []string) (*exec.Cmd, error) {
					return serveCommand(ctx, dir), nil
				}))
			if err := tr.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			cl := mcpgo.NewClient(tr, opts...)
			defer cl.Close()
			asked := c.asked
			if asked == "" {
				asked = mcpgomcp.LATEST_PROTOCOL_VERSION
			}
			exerciseMCPGo(t, cl, c.asked, negotiated(asked, stdioVersions))
		})
	}
}

func TestInteropSDKHTTP(t *testing.T) {
	dir, tokenFile := interopDir(t)
	url := startServer(t, dir, "--token-file", tokenFile)
	for _, c := range sdkCases() {
		t.Run(c.name, func(t *testing.T) {
			client := mcp.NewClient(&mcp.Implementation{Name: "sdk-interop", Version: "1"}, nil)
			cs, err := client.Connect(interopCtx(t), &mcp.StreamableClientTransport{
				Endpoint:   url,
				HTTPClient: &http.Client{Transport: bearer{interopToken, http.DefaultTransport}},
			}, &mcp.ClientSessionOptions{ProtocolVersion: c.asked})
			if err != nil {
				t.Fatalf("connect asking for %q: %v", c.asked, err)
			}
			defer cs.Close()
			asked := c.asked
			if asked == "" {
				asked = mcp.SupportedProtocolVersions()[0]
			}
			exerciseSDK(t, cs, c.asked, negotiated(asked, httpVersions))
		})
	}
}

func TestInteropSDKStdio(t *testing.T) {
	dir, _ := interopDir(t)
	for _, c := range sdkCases() {
		t.Run(c.name, func(t *testing.T) {
			client := mcp.NewClient(&mcp.Implementation{Name: "sdk-interop", Version: "1"}, nil)
			cs, err := client.Connect(interopCtx(t), &mcp.CommandTransport{Command: serveCommand(context.Background(), dir)},
				&mcp.ClientSessionOptions{ProtocolVersion: c.asked})
			if err != nil {
				t.Fatalf("connect asking for %q: %v", c.asked, err)
			}
			defer cs.Close()
			asked := c.asked
			if asked == "" {
				asked = mcp.SupportedProtocolVersions()[0]
			}
			exerciseSDK(t, cs, c.asked, negotiated(asked, stdioVersions))
		})
	}
}

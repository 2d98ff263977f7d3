package host_test

import (
	"context"
	"fmt"
	"log"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared"
)

// The hello world of an embedder: the embedded default policy (no
// config.hcl here) runs the subprocess tier, whose plugin the host finds
// through ORQEST_PLUGIN_DIR (set here by the test's TestMain, as an
// installation would set it, or put the plugins in
// ~/.config/orqest-sandbox/plugins).
func Example() {
	ctx := context.Background()
	h, err := host.LoadFile(ctx, "") // ./config.hcl or the embedded default
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	sb, err := h.Sandbox(ctx, "") // the default sandbox
	if err != nil {
		log.Fatal(err)
	}
	out, err := host.RunInSandbox(ctx, sb, "def add(a, b):\n    return a + b",
		host.RunOptions{ReturnExpression: "add(2, 3)"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	// Output: 5
}

// Execute returns the whole result: output, captured stdout, the limits
// that applied; a body the validator refuses is a result with the
// findings, and the plugin never sees it.
func ExampleSandbox_Execute() {
	ctx := context.Background()
	h, err := host.LoadFile(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	sb, err := h.Sandbox(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	res, err := sb.Execute(ctx, shared.ExecuteRequest{
		Code: "print('hi', args['name'])\nreturn len(args['name'])",
		Args: []byte(`{"name": "ada"}`),
	})
	if err != nil {
		log.Fatal(err) // infrastructure only: user-code failures are in res
	}
	fmt.Println(res.Success, string(res.Output), res.Stdout)

	res, _ = sb.Execute(ctx, shared.ExecuteRequest{Code: "import os\nreturn os.getcwd()"})
	fmt.Println(res.ErrorKind, res.Findings[0].Rule)
	// Output:
	// true 3 hi ada
	//
	// validation import-not-allowed
}

// ExecuteBatch runs many candidates through one plugin and one warm
// fork-server, results in the order given.
func ExampleSandbox_ExecuteBatch() {
	ctx := context.Background()
	h, err := host.LoadFile(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	sb, err := h.Sandbox(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	var reqs []shared.ExecuteRequest
	for _, body := range []string{"return args['x'] + 1", "return args['x'] * 2", "return 1 / 0"} {
		reqs = append(reqs, shared.ExecuteRequest{Code: body, Args: []byte(`{"x": 20}`)})
	}
	for _, r := range sb.ExecuteBatch(ctx, reqs, host.BatchOptions{}) {
		if r.Result.Success {
			fmt.Println(r.Index, string(r.Result.Output))
		} else {
			fmt.Println(r.Index, r.Result.ErrorKind)
		}
	}
	// Output:
	// 0 21
	// 1 40
	// 2 runtime
}

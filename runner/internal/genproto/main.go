// Command genproto writes the fork-server protocol's constants for the
// runner's Python (py/protocol.py) and C (forkcore/protocol.h) sides from
// runner/childproto.go. Run it with `go generate ./runner`.
package main

import (
	"log"
	"os"

	"github.com/orqest/sandbox/runner"
)

func main() {
	// go generate runs in the package directory (runner/).
	for path, text := range map[string]string{
		"py/protocol.py":      runner.GeneratedPython(),
		"forkcore/protocol.h": runner.GeneratedCHeader(),
	} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

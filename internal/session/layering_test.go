package session

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBackendsImportNoOtherBackend: no backend package imports another
// (what they share lives in the contract, runner and this kit), and the
// kubernetes backend, which runs no Python itself, embeds no runner.
func TestBackendsImportNoOtherBackend(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the backends' dependencies")
	}
	const mod = "github.com/orqest/sandbox/"
	backends := []string{"inprocess", "subprocess", "docker", "gvisor", "kubernetes"}
	for _, b := range backends {
		out, err := exec.Command(goTool, "list", "-deps", mod+"plugins/"+b).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps plugins/%s: %v\n%s", b, err, out)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			for _, other := range backends {
				if other != b && (d == mod+"plugins/"+other || strings.HasPrefix(d, mod+"plugins/"+other+"/")) {
					t.Errorf("plugins/%s depends on plugins/%s", b, other)
				}
			}
			if b == "kubernetes" && (d == mod+"runner" || strings.HasPrefix(d, mod+"runner/")) {
				t.Errorf("plugins/kubernetes depends on %s: it would embed the Python runner", d)
			}
		}
	}
}

package shared

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPrepare(t *testing.T) {
	d := Defaults{Timeout: 5 * time.Second, MemoryMB: 128, MaxOutputBytes: 1 << 20, MaxCodeBytes: 10, MaxArgsBytes: 20}
	p, err := Prepare(ExecuteRequest{Code: "return 1", MemoryMB: 64}, d)
	if err != nil {
		t.Fatal(err)
	}
	if p.Timeout != 5*time.Second || p.MemoryMB != 64 || p.MaxOutputBytes != 1<<20 || string(p.Args) != "{}" {
		t.Fatalf("prepared %+v", p)
	}
	// Zero defaults leave zero limits alone (a backend that decides later).
	if p, _ := Prepare(ExecuteRequest{Code: "x"}, Defaults{MaxCodeBytes: 10, MaxArgsBytes: 20}); p.Timeout != 0 || p.MemoryMB != 0 {
		t.Fatalf("zero defaults filled: %+v", p)
	}
	for name, req := range map[string]ExecuteRequest{
		"negative": {Code: "x", Timeout: -1},
		"code":     {Code: strings.Repeat("x", 11)},
		"args":     {Code: "x", Args: json.RawMessage(`{"a":"` + strings.Repeat("b", 20) + `"}`)},
		"not obj":  {Code: "x", Args: json.RawMessage(`[1]`)},
	} {
		if _, err := Prepare(req, d); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
}

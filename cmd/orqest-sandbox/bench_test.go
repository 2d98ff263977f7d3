package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchJSON drives `bench --json` through the real plugin: both the
// sandbox row and the naive baseline row must be present with the contract's
// field names, and every call must have returned the right value.
func TestBenchJSON(t *testing.T) {
	needPlugin(t)
	r := runCLI(t, "", "", "bench", "-n", "4", "--concurrency", "2", "--warmup", "1", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.stderr, r.stdout)
	}
	var out struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(out.Results) != 3 {
		t.Fatalf("want sandbox, baseline and fork-floor rows, got %v", out.Results)
	}
	for _, row := range out.Results {
		for _, k := range []string{"name", "p50_ms", "p99_ms", "throughput_per_s", "n", "concurrency"} {
			if _, ok := row[k]; !ok {
				t.Errorf("row %v lacks %q", row, k)
			}
		}
		if row["n"].(float64) != 4 || row["concurrency"].(float64) != 2 || row["errors"].(float64) != 0 {
			t.Errorf("row %v", row)
		}
	}
	if name := out.Results[1]["name"].(string); name != "naive-python3-per-call" {
		t.Errorf("baseline row named %q", name)
	}
	if !strings.HasPrefix(out.Results[0]["name"].(string), "tier1/") {
		t.Errorf("sandbox row named %v", out.Results[0]["name"])
	}
}

func TestBenchUnknownSandbox(t *testing.T) {
	needPlugin(t)
	r := runCLI(t, "", "", "bench", "-n", "1", "--sandbox", "nope")
	if r.code != 3 || !strings.Contains(r.stderr, "nope") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
}

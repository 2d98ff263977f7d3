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

// `bench --new-bodies` adds a row of generated bodies after the sandbox's
// row; every call is a body never seen before, and every one must run
// (they import the 8 modules the generator names).
func TestBenchNewBodies(t *testing.T) {
	needPlugin(t)
	seen := map[string]bool{}
	for i := range 50 {
		b := newBody(i)
		if seen[b] {
			t.Fatalf("body %d repeats an earlier one", i)
		}
		seen[b] = true
		if n := len(b); n < 1000 || n > 3000 {
			t.Fatalf("body %d is %d bytes, want a 1-3 KB candidate", i, n)
		}
	}
	r := runCLI(t, "", "", "bench", "-n", "4", "--warmup", "1", "--new-bodies", "--no-baseline", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s\n%s", r.code, r.stderr, r.stdout)
	}
	var out struct {
		Results []struct {
			Name   string `json:"name"`
			N      int    `json:"n"`
			Errors int    `json:"errors"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if len(out.Results) != 2 || out.Results[1].Name != out.Results[0].Name+"/new-bodies" {
		t.Fatalf("want the sandbox row and its new-bodies row, got %+v", out.Results)
	}
	if row := out.Results[1]; row.N != 4 || row.Errors != 0 {
		t.Errorf("new-bodies row %+v", row)
	}
}

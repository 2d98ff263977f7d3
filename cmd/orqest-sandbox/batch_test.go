package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// batchResult is what a test reads of a `run --batch` output line.
type batchResult struct {
	Index      int             `json:"index"`
	ID         string          `json:"id"`
	Success    bool            `json:"success"`
	Output     json.RawMessage `json:"output"`
	ErrorKind  string          `json:"error_kind"`
	Error      string          `json:"error"`
	ErrorClass []string        `json:"error_class"`
}

// TestRunBatchFile: one line of output per request, matched by index and
// id; user-code failures and rejections are results, a malformed line fails
// alone (error_class) and makes the exit code 3; --allow and --timeout
// apply to every line that does not say otherwise.
func TestRunBatchFile(t *testing.T) {
	needPlugin(t)
	dir := t.TempDir()
	lines := []string{
		`{"id":"sum","code":"return sum(args['xs'])","args":{"xs":[1,2,3]}}`,
		`{"id":"re","code":"import re\nreturn re.findall(r'\\d+', args['s'])","args":{"s":"a1 b22"}}`,
		``,
		`{"id":"boom","code":"return 1/0"}`,
		`{"id":"os","code":"import os\nreturn 1"}`,
		`{"id":"slow","code":"while True:\n    pass","timeout":"300ms"}`,
		`not json`,
		`{"id":"typo","cod":"return 1"}`,
	}
	file := filepath.Join(dir, "batch.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, dir, "", "run", "--batch", file, "--allow", "re", "--timeout", "5s", "--concurrency", "2")
	if r.code != exitError {
		t.Errorf("exit %d, want %d (two lines could not run)\n%s", r.code, exitError, r.stderr)
	}
	got := map[int]batchResult{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var b batchResult
		if err := json.Unmarshal([]byte(l), &b); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		got[b.Index] = b
	}
	if len(got) != 7 {
		t.Fatalf("%d result lines, want 7 (the blank line is no request):\n%s", len(got), r.stdout)
	}
	check := func(i int, id string, ok func(b batchResult) bool) {
		t.Helper()
		if b := got[i]; b.ID != id || !ok(b) {
			t.Errorf("index %d: %+v", i, b)
		}
	}
	check(0, "sum", func(b batchResult) bool { return b.Success && string(b.Output) == "6" })
	check(1, "re", func(b batchResult) bool { return b.Success && string(b.Output) == `["1","22"]` })
	check(2, "boom", func(b batchResult) bool { return !b.Success && b.ErrorKind == "runtime" && len(b.ErrorClass) == 0 })
	check(3, "os", func(b batchResult) bool { return b.ErrorKind == "validation" })
	check(4, "slow", func(b batchResult) bool { return b.ErrorKind == "timeout" })
	check(5, "", func(b batchResult) bool {
		return strings.Contains(b.Error, "line 7") && strings.Join(b.ErrorClass, ",") == "invalid_argument"
	})
	check(6, "", func(b batchResult) bool { return strings.Contains(b.Error, `unknown field "cod"`) })
}

// TestRunBatchStreams: results are written as each request finishes, so a
// caller can feed the next candidate after reading the last result over
// one process and one plugin.
func TestRunBatchStreams(t *testing.T) {
	needPlugin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "run", "--batch", "-")
	cmd.Dir = t.TempDir()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	for i := 0; i < 5; i++ {
		fmt.Fprintf(stdin, `{"code":"return args['n'] + 1","args":{"n":%d}}`+"\n", i)
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("no result for request %d while stdin stays open: %v\n%s", i, err, stderr.String())
		}
		var b batchResult
		if err := json.Unmarshal([]byte(line), &b); err != nil || !b.Success || b.Index != i || string(b.Output) != fmt.Sprint(i+1) {
			t.Fatalf("request %d: %q %v", i, line, err)
		}
	}
	stdin.Close()
	if rest, _ := io.ReadAll(out); len(rest) != 0 {
		t.Errorf("output after the last result: %q", rest)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, stderr.String())
	}
}

// A batch line without code (absent, empty or white space) is refused as
// run_python refuses it, in its own result line (invalid_argument), and
// the lines after it run; the exit code says a line could not run.
func TestRunBatchRefusesMissingCode(t *testing.T) {
	needPlugin(t)
	in := strings.Join([]string{
		`{"id":"a","code":"return 1"}`,
		`{"id":"absent"}`,
		`{"id":"empty","code":""}`,
		`{"id":"blank","code":"  \n"}`,
		`{"id":"b","code":"return 2"}`,
	}, "\n") + "\n"
	r := runCLI(t, "", in, "run", "--batch", "-", "--concurrency", "1")
	if r.code != exitError {
		t.Errorf("exit %d, want %d (three lines could not run)\n%s", r.code, exitError, r.stderr)
	}
	got := map[string]batchResult{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var b batchResult
		if err := json.Unmarshal([]byte(l), &b); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		got[b.ID] = b
	}
	if len(got) != 5 || !got["a"].Success || string(got["a"].Output) != "1" || !got["b"].Success || string(got["b"].Output) != "2" {
		t.Fatalf("results: %+v", got)
	}
	for _, id := range []string{"absent", "empty", "blank"} {
		if b := got[id]; b.Success || !strings.Contains(b.Error, "code missing on line") || strings.Join(b.ErrorClass, ",") != "invalid_argument" {
			t.Errorf("%s: %+v, want a refusal naming the missing code", id, b)
		}
	}
}

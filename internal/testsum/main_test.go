package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// events is `go test -json ./...` of a module with a package whose tests
// pass, skip twice for one reason and fail in a subtest, one that does not
// build and one without tests.
const events = `{"Action":"start","Package":"m"}
{"Action":"run","Package":"m","Test":"TestPass"}
{"Action":"output","Package":"m","Test":"TestPass","Output":"=== RUN   TestPass\n"}
{"Action":"output","Package":"m","Test":"TestPass","Output":"    a_test.go:5: noise\n"}
{"Action":"output","Package":"m","Test":"TestPass","Output":"--- PASS: TestPass (0.00s)\n"}
{"Action":"pass","Package":"m","Test":"TestPass","Elapsed":0}
{"Action":"run","Package":"m","Test":"TestSkip"}
{"Action":"output","Package":"m","Test":"TestSkip","Output":"=== RUN   TestSkip\n"}
{"Action":"output","Package":"m","Test":"TestSkip","Output":"    a_test.go:6: first\n"}
{"Action":"output","Package":"m","Test":"TestSkip","Output":"    a_test.go:6: SKIPPING cluster test: no kubeconfig\n"}
{"Action":"output","Package":"m","Test":"TestSkip","Output":"        (make k8s-up)\n"}
{"Action":"output","Package":"m","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}
{"Action":"skip","Package":"m","Test":"TestSkip","Elapsed":0}
{"Action":"run","Package":"m","Test":"TestSkip2"}
{"Action":"output","Package":"m","Test":"TestSkip2","Output":"=== RUN   TestSkip2\n"}
{"Action":"output","Package":"m","Test":"TestSkip2","Output":"    b_test.go:9: SKIPPING cluster test: no kubeconfig\n"}
{"Action":"output","Package":"m","Test":"TestSkip2","Output":"        (make k8s-up)\n"}
{"Action":"output","Package":"m","Test":"TestSkip2","Output":"--- SKIP: TestSkip2 (0.00s)\n"}
{"Action":"skip","Package":"m","Test":"TestSkip2","Elapsed":0}
{"Action":"run","Package":"m","Test":"TestBare"}
{"Action":"output","Package":"m","Test":"TestBare","Output":"--- SKIP: TestBare (0.00s)\n"}
{"Action":"skip","Package":"m","Test":"TestBare","Elapsed":0}
{"Action":"run","Package":"m","Test":"TestFail"}
{"Action":"output","Package":"m","Test":"TestFail","Output":"=== RUN   TestFail\n"}
{"Action":"output","Package":"m","Test":"TestFail","Output":"    a_test.go:8: parent before\n"}
{"Action":"run","Package":"m","Test":"TestFail/ok"}
{"Action":"output","Package":"m","Test":"TestFail/ok","Output":"=== RUN   TestFail/ok\n"}
{"Action":"output","Package":"m","Test":"TestFail/ok","Output":"--- PASS: TestFail/ok (0.00s)\n"}
{"Action":"pass","Package":"m","Test":"TestFail/ok","Elapsed":0}
{"Action":"run","Package":"m","Test":"TestFail/bad"}
{"Action":"output","Package":"m","Test":"TestFail/bad","Output":"=== RUN   TestFail/bad\n"}
{"Action":"output","Package":"m","Test":"TestFail/bad","Output":"    a_test.go:10: boom\n"}
{"Action":"output","Package":"m","Test":"TestFail/bad","Output":"        second line\n"}
{"Action":"output","Package":"m","Test":"TestFail/bad","Output":"--- FAIL: TestFail/bad (0.00s)\n"}
{"Action":"fail","Package":"m","Test":"TestFail/bad","Elapsed":0}
{"Action":"output","Package":"m","Test":"TestFail","Output":"    a_test.go:11: parent log\n"}
{"Action":"output","Package":"m","Test":"TestFail","Output":"--- FAIL: TestFail (0.00s)\n"}
{"Action":"fail","Package":"m","Test":"TestFail","Elapsed":0}
{"Action":"output","Package":"m","Output":"FAIL\n"}
{"Action":"output","Package":"m","Output":"FAIL\tm\t0.006s\n"}
{"Action":"fail","Package":"m","Elapsed":0.007}
{"ImportPath":"m/broken [m/broken.test]","Action":"build-output","Output":"# m/broken [m/broken.test]\n"}
{"ImportPath":"m/broken [m/broken.test]","Action":"build-output","Output":"broken/b.go:3:23: cannot use \"x\" as int value\n"}
{"ImportPath":"m/broken [m/broken.test]","Action":"build-fail"}
{"Action":"start","Package":"m/broken"}
{"Action":"output","Package":"m/broken","Output":"FAIL\tm/broken [build failed]\n"}
{"Action":"fail","Package":"m/broken","Elapsed":0,"FailedBuild":"m/broken [m/broken.test]"}
{"Action":"start","Package":"m/ok"}
{"Action":"run","Package":"m/ok","Test":"TestA"}
{"Action":"output","Package":"m/ok","Test":"TestA","Output":"--- PASS: TestA (0.00s)\n"}
{"Action":"pass","Package":"m/ok","Test":"TestA","Elapsed":0}
{"Action":"output","Package":"m/ok","Output":"PASS\n"}
{"Action":"output","Package":"m/ok","Output":"ok  \tm/ok\t0.010s\n"}
{"Action":"pass","Package":"m/ok","Elapsed":0.01}
{"Action":"start","Package":"m/notests"}
{"Action":"output","Package":"m/notests","Output":"?   \tm/notests\t[no test files]\n"}
{"Action":"skip","Package":"m/notests","Elapsed":0}
`

// What plain `go test ./...` prints of the same run.
const plain = `--- FAIL: TestFail (0.00s)
    a_test.go:8: parent before
    --- FAIL: TestFail/bad (0.00s)
        a_test.go:10: boom
            second line
    a_test.go:11: parent log
FAIL
FAIL	m	0.006s
# m/broken [m/broken.test]
broken/b.go:3:23: cannot use "x" as int value
FAIL	m/broken [build failed]
ok  	m/ok	0.010s
?   	m/notests	[no test files]
`

func TestSummarize(t *testing.T) {
	var out bytes.Buffer
	s := newSummarizer(&out, false)
	if err := s.read(strings.NewReader(events)); err != nil {
		t.Fatal(err)
	}
	if out.String() != plain {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), plain)
	}
	r := s.result("x")
	// TestPass, TestFail/ok, TestA; TestFail/bad, TestFail and the package
	// that did not build; TestSkip, TestSkip2, TestBare.
	if got := r.counts(); got != "3 passed, 3 failed, 3 skipped" {
		t.Errorf("counts: %s", got)
	}
	want := []skip{{"m", "SKIPPING cluster test: no kubeconfig (make k8s-up)", 2}, {"m", "(no reason given)", 1}}
	if len(r.Skips) != len(want) || r.Skips[0] != want[0] || r.Skips[1] != want[1] {
		t.Errorf("skips: %+v, want %+v", r.Skips, want)
	}
}

// With -v among go test's flags, every line is printed as it comes.
func TestSummarizeVerbose(t *testing.T) {
	var out bytes.Buffer
	s := newSummarizer(&out, true)
	s.read(strings.NewReader(events))
	for _, want := range []string{"=== RUN   TestPass\n", "    a_test.go:5: noise\n", "--- SKIP: TestSkip2", "ok  \tm/ok"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verbose output lacks %q", want)
		}
	}
}

// run keeps go test's exit code, ends with the counts alone on the last
// line, and -report adds up the runs -record kept.
func TestRunRecordReport(t *testing.T) {
	dir := t.TempDir()
	file, rec := filepath.Join(dir, "events.json"), filepath.Join(dir, "runs.jsonl")
	if err := os.WriteFile(file, []byte(events), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"-record", rec, "-label", "test-go", "--", "/bin/sh", "-c", `cat "$0"; exit 3`, file}, &out, &errb); code != 3 {
		t.Errorf("exit %d, want go test's 3 (%s)", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; last != "3 passed, 3 failed, 3 skipped" {
		t.Errorf("last line %q", last)
	}
	if !strings.Contains(out.String(), "skipped 3, by reason:\n     2  m: SKIPPING cluster test: no kubeconfig (make k8s-up)\n     1  m: (no reason given)\n") {
		t.Errorf("no skip reasons in:\n%s", out.String())
	}
	out.Reset()
	if code := run([]string{"-record", rec, "-label", "test-race", "--", "/bin/sh", "-c", `grep '"m/ok"' "$0"`, file}, &out, &errb); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if got := strings.TrimSpace(out.String()); got != "ok  \tm/ok\t0.010s\n1 passed, 0 failed, 0 skipped" {
		t.Errorf("a passing run: %q", got)
	}
	out.Reset()
	if code := run([]string{"-report", rec}, &out, &errb); code != 0 {
		t.Fatalf("-report: exit %d: %s", code, errb.String())
	}
	want := "\ntest-go: 3 passed, 3 failed, 3 skipped\ntest-race: 1 passed, 0 failed, 0 skipped\n" +
		"skipped 3, by reason:\n     2  m: SKIPPING cluster test: no kubeconfig (make k8s-up)\n     1  m: (no reason given)\n" +
		"4 passed, 3 failed, 3 skipped\n"
	if out.String() != want {
		t.Errorf("-report:\n%q\nwant\n%q", out.String(), want)
	}
}

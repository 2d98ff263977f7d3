// Command testsum runs `go test -json …`, prints what plain `go test` would
// (a package that passes is its "ok" line; one that fails, the output of its
// failed tests and its FAIL lines; build errors as they come), and ends
// with the tests that were skipped, grouped by the reason they gave, and
// the line
//
//	N passed, N failed, N skipped
//
// alone. Its exit code is go test's. `make test-go` (and test-race,
// test-example) run the suite through it.
//
// Usage:
//
//	testsum [-record FILE -label NAME] -- go test -json [flags] [packages]
//	testsum -report FILE
//
// With -record, the run's counts and skip reasons are appended to FILE as
// one JSON line under NAME; -report prints each recorded run's line, the
// skip reasons of all of them, and the totals, so that `make test` ends with
// the counts of every run it made. Counts are of tests and subtests, as go
// test reports them; a package that fails without a failed test (it did not
// build, its TestMain failed, it timed out) counts as one failure.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testsum", flag.ContinueOnError)
	fs.SetOutput(stderr)
	record := fs.String("record", "", "append this run's counts to `FILE` (JSON lines)")
	label := fs.String("label", "go test", "the run's name in -record's FILE")
	report := fs.String("report", "", "print the runs recorded in `FILE` and their totals")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *report != "" {
		if err := printReport(*report, stdout); err != nil {
			fmt.Fprintf(stderr, "testsum: %v\n", err)
			return 1
		}
		return 0
	}
	cmdline := fs.Args()
	if len(cmdline) == 0 {
		fmt.Fprintln(stderr, "usage: testsum [-record FILE -label NAME] -- go test -json [flags] [packages] | testsum -report FILE")
		return 2
	}
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Stdin, cmd.Stderr = os.Stdin, stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testsum: %v\n", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testsum: %v\n", err)
		return 1
	}
	s := newSummarizer(stdout, slices.Contains(cmdline, "-v") || slices.Contains(cmdline, "-test.v"))
	if err := s.read(out); err != nil {
		fmt.Fprintf(stderr, "testsum: reading go test's output: %v\n", err)
	}
	code := 0
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			fmt.Fprintf(stderr, "testsum: %v\n", err)
		}
		code = 1
		if ee != nil && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
	}
	res := s.result(*label)
	printSkips(stdout, []runResult{res})
	fmt.Fprintln(stdout, res.counts())
	if *record != "" {
		if err := appendRecord(*record, res); err != nil {
			fmt.Fprintf(stderr, "testsum: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

// skip is a group of skipped tests: their package, the reason they gave,
// how many.
type skip struct {
	Package string `json:"package"`
	Reason  string `json:"reason"`
	Count   int    `json:"count"`
}

// runResult is what one run counted.
type runResult struct {
	Label   string `json:"label"`
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Skipped int    `json:"skipped"`
	Skips   []skip `json:"skips,omitempty"`
}

func (r runResult) counts() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", r.Passed, r.Failed, r.Skipped)
}

// testOut is what a test printed: its own lines and, in order among them,
// the blocks of its subtests that failed.
type testOut struct {
	header string // its "--- FAIL" line
	lines  []outLine
}

// outLine is a line a test printed, or the block of a failed subtest
// (indented already).
type outLine struct {
	text  string
	block bool
}

// pkgState is a package's output while it runs.
type pkgState struct {
	tests   map[string]*testOut
	failed  []string // blocks of the failed top-level tests
	lines   []string // package-level output
	nFailed int
}

// summarizer turns test2json events into plain go test output and counts.
type summarizer struct {
	w       io.Writer
	verbose bool
	pkgs    map[string]*pkgState
	order   []string
	res     runResult
	skips   map[[2]string]int
}

func newSummarizer(w io.Writer, verbose bool) *summarizer {
	return &summarizer{w: w, verbose: verbose, pkgs: map[string]*pkgState{}, skips: map[[2]string]int{}}
}

func (s *summarizer) pkg(name string) *pkgState {
	p, ok := s.pkgs[name]
	if !ok {
		p = &pkgState{tests: map[string]*testOut{}}
		s.pkgs[name] = p
		s.order = append(s.order, name)
	}
	return p
}

// read consumes go test's standard output. A line that is not an event is
// printed as it is.
func (s *summarizer) read(r io.Reader) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var ev event
			if line[0] == '{' && json.Unmarshal(line, &ev) == nil && ev.Action != "" {
				s.event(ev)
			} else {
				s.w.Write(line)
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	for _, name := range s.order { // a package cut short (go test killed)
		if p, ok := s.pkgs[name]; ok {
			s.finish(name, p, "fail")
		}
	}
	return nil
}

func (s *summarizer) event(ev event) {
	switch ev.Action {
	case "build-output":
		io.WriteString(s.w, ev.Output)
		return
	case "build-fail", "start":
		return
	}
	if s.verbose && ev.Output != "" {
		io.WriteString(s.w, ev.Output)
	}
	p := s.pkg(ev.Package)
	if ev.Test == "" {
		switch ev.Action {
		case "output":
			p.lines = append(p.lines, ev.Output)
		case "pass", "fail", "skip":
			s.finish(ev.Package, p, ev.Action)
		}
		return
	}
	t := p.tests[ev.Test]
	if t == nil {
		t = &testOut{}
		p.tests[ev.Test] = t
	}
	switch ev.Action {
	case "output":
		switch out := ev.Output; {
		case strings.HasPrefix(out, "=== "):
		case strings.HasPrefix(strings.TrimLeft(out, " "), "--- ") && t.header == "":
			t.header = strings.TrimLeft(out, " ")
		default:
			t.lines = append(t.lines, outLine{text: out})
		}
	case "pass":
		s.res.Passed++
		delete(p.tests, ev.Test)
	case "skip":
		s.res.Skipped++
		s.skips[[2]string{ev.Package, skipReason(t.lines)}]++
		delete(p.tests, ev.Test)
	case "fail":
		s.res.Failed++
		p.nFailed++
		block := t.block(depth(ev.Test))
		delete(p.tests, ev.Test)
		if i := strings.LastIndexByte(ev.Test, '/'); i >= 0 {
			parent := p.tests[ev.Test[:i]]
			if parent == nil {
				parent = &testOut{}
				p.tests[ev.Test[:i]] = parent
			}
			parent.lines = append(parent.lines, outLine{text: block, block: true})
		} else {
			p.failed = append(p.failed, block)
		}
	}
}

// depth is how deep a (sub)test is: 0 for a top-level test.
func depth(test string) int { return strings.Count(test, "/") }

// block is the test's output as plain go test prints a failed test: its
// "--- FAIL" line, then what it printed, indented by its depth.
func (t *testOut) block(d int) string {
	indent := strings.Repeat("    ", d)
	var b strings.Builder
	if t.header != "" {
		b.WriteString(indent + t.header)
	}
	for _, l := range t.lines {
		if l.block {
			b.WriteString(l.text)
			continue
		}
		b.WriteString(indent + l.text)
	}
	return b.String()
}

// finish prints a package's output once it has ended: its "ok" (or "?")
// line when it passed, else its failed tests (and those it left running)
// and its own lines.
func (s *summarizer) finish(name string, p *pkgState, action string) {
	if action == "fail" {
		if p.nFailed == 0 {
			s.res.Failed++ // the package failed without a failed test
		}
		if !s.verbose {
			for _, b := range p.failed {
				io.WriteString(s.w, b)
			}
			var running []string
			for test := range p.tests {
				if depth(test) == 0 {
					running = append(running, test)
				}
			}
			sort.Strings(running)
			for _, test := range running {
				io.WriteString(s.w, p.tests[test].block(0))
			}
			for _, l := range p.lines {
				io.WriteString(s.w, l)
			}
		}
	} else if !s.verbose {
		for _, l := range p.lines {
			if strings.HasPrefix(l, "ok ") || strings.HasPrefix(l, "?") {
				io.WriteString(s.w, l)
			}
		}
	}
	delete(s.pkgs, name)
}

// logLine is the start of a test's log entry: "    file_test.go:12: ".
var logLine = regexp.MustCompile(`^ {4}[\w.-]+\.go:\d+: `)

// skipReason is the last log entry of a skipped test (what it passed to
// t.Skip), on one line, without its file:line.
func skipReason(lines []outLine) string {
	start := -1
	for i, l := range lines {
		if !l.block && logLine.MatchString(l.text) {
			start = i
		}
	}
	if start < 0 {
		return "(no reason given)"
	}
	entry := []string{logLine.ReplaceAllString(lines[start].text, "")}
	for _, l := range lines[start+1:] {
		if l.block || !strings.HasPrefix(l.text, "        ") { // not a continuation line
			break
		}
		entry = append(entry, l.text)
	}
	return strings.Join(strings.Fields(strings.Join(entry, " ")), " ")
}

func (s *summarizer) result(label string) runResult {
	r := s.res
	r.Label = label
	for k, n := range s.skips {
		r.Skips = append(r.Skips, skip{Package: k[0], Reason: k[1], Count: n})
	}
	sortSkips(r.Skips)
	return r
}

func sortSkips(skips []skip) {
	sort.Slice(skips, func(i, j int) bool {
		a, b := skips[i], skips[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Package != b.Package {
			return a.Package < b.Package
		}
		return a.Reason < b.Reason
	})
}

// printSkips prints the skipped tests of runs grouped by package and
// reason, most first.
func printSkips(w io.Writer, runs []runResult) {
	total := map[[2]string]int{}
	for _, r := range runs {
		for _, sk := range r.Skips {
			total[[2]string{sk.Package, sk.Reason}] += sk.Count
		}
	}
	if len(total) == 0 {
		return
	}
	var all []skip
	n := 0
	for k, c := range total {
		all = append(all, skip{Package: k[0], Reason: k[1], Count: c})
		n += c
	}
	sortSkips(all)
	fmt.Fprintf(w, "skipped %d, by reason:\n", n)
	for _, sk := range all {
		fmt.Fprintf(w, "%6d  %s: %s\n", sk.Count, sk.Package, sk.Reason)
	}
}

func appendRecord(path string, r runResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("-record: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("-record %s: %w", path, err)
	}
	return f.Close()
}

// printReport prints the runs recorded in path: a line for each, their
// skips, and the totals last.
func printReport(path string, w io.Writer) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("-report: %w", err)
	}
	var runs []runResult
	var total runResult
	for n, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r runResult
		if err := json.Unmarshal(line, &r); err != nil {
			return fmt.Errorf("-report %s: line %d: %w", path, n+1, err)
		}
		runs = append(runs, r)
		total.Passed += r.Passed
		total.Failed += r.Failed
		total.Skipped += r.Skipped
	}
	fmt.Fprintln(w)
	for _, r := range runs {
		fmt.Fprintf(w, "%s: %s\n", r.Label, r.counts())
	}
	printSkips(w, runs)
	fmt.Fprintln(w, total.counts())
	return nil
}

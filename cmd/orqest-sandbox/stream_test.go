package main

import (
	"bufio"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// run prints the code's output as it is written: the first line reaches
// the CLI's stdout while the code still sleeps, and the value follows
// the rest of the output at the end.
func TestRunStreamsOutput(t *testing.T) {
	needPlugin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "run", "--allow", "time", "-e", "import time\nprint('first', flush=True)\ntime.sleep(2)\nprint('second')\nreturn 3")
	cmd.Dir = t.TempDir()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	firstAt := time.Now()
	if err != nil || line != "first\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	rest := new(strings.Builder)
	for {
		l, err := r.ReadString('\n')
		rest.WriteString(l)
		if err != nil {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if early := time.Since(firstAt); early < time.Second {
		t.Errorf("the first line came %v before the CLI exited; want it while the code slept 2 s", early)
	}
	if rest.String() != "second\n3\n" {
		t.Errorf("after the first line: %q", rest.String())
	}
}

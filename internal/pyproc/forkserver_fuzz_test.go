package pyproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/shared"
)

// FuzzControlMessages: the fork-server's control messages as the zygote
// (or its C loop) sends them, one datagram each (data split at NUL bytes,
// which JSON never holds raw), the i-th carrying fds[i]%4 descriptors.
// The first must be "ready" or "fatal" (readyMessage); the others never
// panic the dispatcher (handle), every descriptor they carry ends up
// either with an idle child (exactly its socket and pidfd; its socket only
// when the ready message said "pidfds": false) or closed,
// the idle pool never overflows, and an exit report reaches the child it
// names with the status and CPU time it says, which ClassifyDeath
// explains.
func FuzzControlMessages(f *testing.F) {
	for _, c := range []struct {
		data string
		fds  []byte
	}{
		{`{"t":"ready","pid":10,"layers":["no_new_privs","seccomp"],"missing":{"landlock":"kernel too old"},"core":true,"hot_pages":12,"hot_pages_new":3,"pidfds":true}` +
			"\x00" + `{"t":"idle","pid":11}` +
			"\x00" + `{"t":"idle","pid":12}` +
			"\x00" + `{"t":"exit","pid":11,"status":9,"utime":0.25,"stime":0.5}` +
			"\x00" + `{"t":"exit","pid":12,"status":256,"utime":0,"stime":0}`, []byte{0, 2, 2, 0, 0}},
		{`{"t":"fatal","error":"landlock: not supported"}`, nil},
		{`{"t":"ready","pid":10,"pidfds":false}` +
			"\x00" + `{"t":"idle","pid":11}` + "\x00" + `{"t":"idle","pid":12}` + "\x00" + `{"t":"kill","pid":11}` +
			"\x00" + `{"t":"exit","pid":11,"status":9,"utime":0.25,"stime":0.5}`, []byte{1, 2, 0, 0}},
		{`{"t":"ready","pidfds":true}` + "\x00" + `{"t":"idle","pid":1}` + "\x00" + `{"t":"idle","pid":1}` + "\x00" + `{"t":"exit","pid":1,"status":4608}`, []byte{0, 2, 2, 1}},
		{`{"t":"ready"}` + "\x00" + `{"t":"idle","pid":2}` + "\x00" + `{"t":"idle","pid":3}` + "\x00" + `{"t":"warm"}` + "\x00" + `{"t":"ready"}`, []byte{0, 1, 3, 2, 2}},
		{`{"t":"ready"}` + "\x00" + `{"t":"exit","pid":99,"status":-1,"utime":1e308,"stime":1e308}` + "\x00" + `{"t":"exit","pid":"x"}` + "\x00" + `not json`, []byte{0, 0, 2, 3}},
		{`{"t":"took","pid":1,"new":1}`, nil},
		{`{"t":"ready","layers":null,"missing":[]}`, nil},
		{`{"t":"ready","pid":1e400}`, nil},
		{``, nil},
	} {
		f.Add([]byte(c.data), c.fds)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data, fdSpec []byte) {
		msgs := bytes.Split(data, []byte{0})
		if len(msgs) > 64 {
			msgs = msgs[:64]
		}
		m, err := readyMessage(msgs[0], "python3")
		if err != nil {
			if !errors.Is(err, shared.ErrInternal) && !errors.Is(err, shared.ErrUnavailable) {
				t.Fatalf("first message %q: %v", msgs[0], err)
			}
			if errors.Is(err, shared.ErrUnavailable) != (m.T == runner.MsgFatal) {
				t.Fatalf("first message %q: %v", msgs[0], err)
			}
			return
		}
		if m.T != runner.MsgReady {
			t.Fatalf("ready message of type %q", m.T)
		}
		fs := &ForkServer{logger: nopLogger{}, idle: make(chan *fsChild, 16), kids: map[int]*fsChild{}, done: make(chan struct{}), pidfds: m.PIDFDs}

		// Every descriptor first, so that none is reused while the
		// messages are handled.
		type sent struct {
			msg []byte
			fds []int
		}
		var all []sent
		var passed []int
		for i, b := range msgs[1:] {
			var fds []int
			if i < len(fdSpec) {
				for range fdSpec[i] % 4 {
					fd, err := unix.FcntlInt(devnull.Fd(), unix.F_DUPFD_CLOEXEC, 0)
					if err != nil {
						t.Fatal(err)
					}
					fds = append(fds, fd)
				}
			}
			passed = append(passed, fds...)
			all = append(all, sent{b, fds})
		}
		exits := map[*fsChild]fsMsg{}
		for _, s := range all {
			before := map[int]*fsChild{}
			for pid, c := range fs.kids {
				before[pid] = c
			}
			fs.handle(s.msg, s.fds)
			var m fsMsg
			if json.Unmarshal(s.msg, &m) == nil && m.T == runner.MsgExit && before[m.PID] != nil {
				exits[before[m.PID]] = m
			}
		}
		if len(fs.idle) > cap(fs.idle) {
			t.Fatalf("%d idle children", len(fs.idle))
		}
		held := map[int]bool{}
		for len(fs.idle) > 0 {
			c := <-fs.idle
			if c.sock < 0 || held[c.sock] || (fs.pidfds && (c.pidfd < 0 || c.sock == c.pidfd || held[c.pidfd])) || (!fs.pidfds && c.pidfd != -1) {
				t.Fatalf("idle child %d with socket %d and pidfd %d (pidfds %v)", c.pid, c.sock, c.pidfd, fs.pidfds)
			}
			held[c.sock] = true
			if c.pidfd >= 0 {
				held[c.pidfd] = true
			}
			defer c.closeFDs()
			if m, ok := exits[c]; ok {
				select {
				case ex := <-c.exited:
					checkExit(t, m, ex)
				default:
					t.Fatalf("child %d: its exit report was not delivered", c.pid)
				}
			}
		}
		for _, fd := range passed {
			_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if open := err == nil; open != held[fd] {
				if open {
					unix.Close(fd)
				}
				t.Fatalf("descriptor %d: open=%v, held by an idle child=%v", fd, open, held[fd])
			}
		}
	})
}

// checkExit fails unless ex is the exit report m, and ClassifyDeath
// explains it.
func checkExit(t *testing.T, m fsMsg, ex fsExit) {
	t.Helper()
	if int(ex.status) != m.Status {
		t.Fatalf("exit status %d, reported %d", ex.status, m.Status)
	}
	if sum := m.UTime + m.STime; sum >= 0 && sum < 1e6 && math.Abs(ex.cpu.Seconds()-sum) > 1e-6 {
		t.Fatalf("cpu %v, reported %g s", ex.cpu, sum)
	}
	kind, msg := ClassifyDeath(ex.status, ex.cpu, 128, 6, false, "Traceback\nMemoryError\n")
	switch kind {
	case shared.KindTimeout, shared.KindMemory, shared.KindKilled, shared.KindRuntime:
	default:
		t.Fatalf("ClassifyDeath(%v) = %q", ex.status, kind)
	}
	if msg == "" {
		t.Fatalf("ClassifyDeath(%v) says nothing", ex.status)
	}
}

package egress

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/orqest/sandbox/internal/procfs"
)

// A session reaches its proxy through a forwarder inside its own network
// namespace: a small process that listens on ListenAddr there and copies
// each connection to the proxy's Unix socket, which a backend binds into
// the forwarder's filesystem (and not into the session's).

// ListenAddr is where a session reaches its egress proxy, inside its own
// network namespace; ProxyURL is the HTTP_PROXY and HTTPS_PROXY of the
// session.
const (
	ListenAddr = "127.0.0.1:3128"
	ProxyURL   = "http://" + ListenAddr
)

// ProxyEnv is the environment that points HTTP clients (urllib, requests,
// pip, curl) at the proxy URL proxyURL (ProxyURL behind a forwarder, a
// Route's URL with its credential on a Gateway), with nothing exempted.
func ProxyEnv(proxyURL string) []string {
	return []string{"HTTP_PROXY=" + proxyURL, "HTTPS_PROXY=" + proxyURL, "http_proxy=" + proxyURL, "https_proxy=" + proxyURL, "NO_PROXY=", "no_proxy="}
}

// ForwarderScript is the forwarder for an image or sandbox that has
// Python: the standard library only, run with `python3 -I -S -B -c
// ForwarderScript SOCKET PORT` as an unprivileged user. It accepts on
// 127.0.0.1:PORT, copies each connection both ways to the Unix socket
// SOCKET, and prints "ready" once it listens.
const ForwarderScript = `import socket, sys, threading
path, port = sys.argv[1], int(sys.argv[2])
srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", port))
srv.listen(64)
print("ready", flush=True)
def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    try:
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
def serve(c):
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        u.connect(path)
        t = threading.Thread(target=pipe, args=(u, c), daemon=True)
        t.start()
        pipe(c, u)
        t.join()
    except (OSError, RuntimeError):
        pass
    c.close()
    u.close()
while True:
    c, _ = srv.accept()
    try:
        threading.Thread(target=serve, args=(c,), daemon=True).start()
    except RuntimeError:
        c.close()
`

// DirPrefix starts the name of a socket directory in the temporary
// directory: orqest-egress-<pid>-<start>-<random>, so that ReapDirs can
// tell the directories of a process that died.
const DirPrefix = "orqest-egress-"

// Endpoint is a proxy served on a Unix socket in a directory of its own.
type Endpoint struct {
	// Proxy is the session's proxy.
	Proxy *Proxy
	// Dir is the socket's directory (mode 0711: it can be traversed, not
	// listed) and Socket the socket's file name in it (random, mode 0666).
	Dir, Socket string

	l      net.Listener
	served chan struct{}
	onErr  func(error)
}

// Listen creates a socket directory for the process ownerPID (started at
// ownerStart, procfs.StartTime) under tmp ("" for os.TempDir()) and
// serves a proxy of opts on a socket in it. onErr (nil: ignored) gets an
// error of Serve. Close stops it and removes the directory.
func Listen(tmp string, ownerPID int, ownerStart string, opts Options, onErr func(error)) (_ *Endpoint, retErr error) {
	dir, err := os.MkdirTemp(tmp, DirPrefix+strconv.Itoa(ownerPID)+"-"+ownerStart+"-")
	if err != nil {
		return nil, fmt.Errorf("egress socket directory: %w", err)
	}
	defer func() {
		if retErr != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("egress socket directory: %w", err)
	}
	buf := make([]byte, 12)
	_, _ = rand.Read(buf)
	e := &Endpoint{Dir: dir, Socket: hex.EncodeToString(buf) + ".sock", served: make(chan struct{}), onErr: onErr}
	path := filepath.Join(dir, e.Socket)
	if e.l, err = net.Listen("unix", path); err != nil {
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		e.l.Close()
		return nil, fmt.Errorf("egress socket: %w", err)
	}
	e.Proxy = New(opts)
	go func() {
		defer close(e.served)
		if err := e.Proxy.Serve(e.l); err != nil && e.onErr != nil {
			e.onErr(err)
		}
	}()
	return e, nil
}

// Close stops the proxy (cutting its tunnels), waits for it and removes
// the socket's directory.
func (e *Endpoint) Close() error {
	err := e.Proxy.Close()
	<-e.served
	return errors.Join(err, os.RemoveAll(e.Dir))
}

// ReapDirs removes the socket directories under tmp ("" for
// os.TempDir()) of processes of this machine that are gone (one killed
// outright cannot remove its own); it returns how many it removed.
func ReapDirs(tmp string) int {
	if tmp == "" {
		tmp = os.TempDir()
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), DirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		f := strings.SplitN(rest, "-", 3)
		if len(f) != 3 || procfs.Alive(f[0], f[1]) {
			continue
		}
		if os.RemoveAll(filepath.Join(tmp, e.Name())) == nil {
			n++
		}
	}
	return n
}

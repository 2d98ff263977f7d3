package inprocess

/*
#cgo pkg-config: python3-embed
#include <stdlib.h>
#include "embed.h"
*/
import "C"

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/orqest/sandbox/runner"
	"github.com/orqest/sandbox/validator"
)

//go:embed driver.py
var driverPy string

// Program is what the embedded interpreter runs once at start: the shared
// runner (rules/checker.py + runner/py, exactly what tier 1 runs) followed by the
// tier-0 driver.
func Program() string { return runner.Program() + "\n\n" + driverPy }

// interp is the one CPython interpreter of the process. All Python work
// happens on one locked OS thread, the goroutine running loop; callers hand
// it jobs over an unbuffered channel, so a send succeeds exactly when the
// job starts and concurrent callers queue.
type interp struct {
	jobs    chan *job
	tid     int // Linux thread id of the interpreter thread
	initErr error

	dead       chan struct{} // closed when the thread is wedged for good
	deadOnce   sync.Once
	deadReason atomic.Value // string
}

// job is one execution handed to the interpreter thread.
type job struct {
	id     int64
	req    []byte // the request JSON, without the rules table
	maxOut int
	// raw, when set, is Python run in the runner's namespace instead of a
	// request (execRaw).
	raw  string
	done chan jobResult // buffered(1)
}

// jobResult is what the driver returned, copied out of Python.
type jobResult struct {
	resp           []byte
	stdout, stderr []byte
	outTrunc       bool
	errTrunc       bool
	err            error // the driver itself raised (see orq_call)
}

var (
	interpOnce sync.Once
	theInterp  *interp
	callIDs    atomic.Int64
)

// sharedInterp starts the interpreter on first use and returns it. CPython
// can be initialised once per process, so every Backend shares it.
func sharedInterp() (*interp, error) {
	interpOnce.Do(func() {
		ip := &interp{jobs: make(chan *job), dead: make(chan struct{})}
		ready := make(chan struct{})
		go ip.loop(ready)
		<-ready
		theInterp = ip
	})
	return theInterp, theInterp.initErr
}

func (ip *interp) loop(ready chan struct{}) {
	// The interpreter belongs to this OS thread for the life of the
	// process: never unlocked (if loop returns, the thread exits).
	runtime.LockOSThread()
	ip.tid = unix.Gettid()
	cprog := C.CString(Program())
	crules := C.CString(string(validator.RulesJSON()))
	var cerr *C.char
	rc := C.orq_init(cprog, crules, &cerr)
	C.free(unsafe.Pointer(cprog))
	C.free(unsafe.Pointer(crules))
	if rc != 0 {
		msg := "unknown error"
		if cerr != nil {
			msg = C.GoString(cerr)
			C.free(unsafe.Pointer(cerr))
		}
		ip.initErr = fmt.Errorf("embedded CPython: %s", msg)
		close(ready)
		return
	}
	close(ready)
	for j := range ip.jobs {
		if j.raw != "" {
			j.done <- ip.runRaw(j.raw)
			continue
		}
		j.done <- ip.run(j)
	}
}

// run executes one job on the interpreter thread.
func (ip *interp) run(j *job) jobResult {
	var r C.orq_result
	var cerr *C.char
	var p *C.char
	if len(j.req) > 0 {
		p = (*C.char)(unsafe.Pointer(&j.req[0]))
	}
	rc := C.orq_call(C.long(j.id), p, C.ptrdiff_t(len(j.req)), C.long(j.maxOut), &r, &cerr)
	runtime.KeepAlive(j.req)
	if rc != 0 {
		msg := "unknown error"
		if cerr != nil {
			msg = C.GoString(cerr)
			C.free(unsafe.Pointer(cerr))
		}
		return jobResult{err: errors.New(msg)}
	}
	res := jobResult{
		resp:     C.GoBytes(unsafe.Pointer(r.resp), C.int(r.resp_len)),
		stdout:   C.GoBytes(unsafe.Pointer(r.out), C.int(r.out_len)),
		stderr:   C.GoBytes(unsafe.Pointer(r.err), C.int(r.err_len)),
		outTrunc: r.out_trunc != 0,
		errTrunc: r.err_trunc != 0,
	}
	C.orq_release(&r)
	return res
}

// execRaw runs src in the runner's namespace on the interpreter thread,
// between calls. It is the tests' stand-in for code that escaped the Python
// layers in an earlier call; nothing outside the tests calls it.
func (ip *interp) execRaw(src string) error {
	j := &job{raw: src, done: make(chan jobResult, 1)}
	ip.jobs <- j
	return (<-j.done).err
}

func (ip *interp) runRaw(src string) jobResult {
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	var cerr *C.char
	if C.orq_exec_raw(csrc, &cerr) != 0 {
		msg := "unknown error"
		if cerr != nil {
			msg = C.GoString(cerr)
			C.free(unsafe.Pointer(cerr))
		}
		return jobResult{err: errors.New(msg)}
	}
	return jobResult{}
}

// interrupt asks call id to stop (safe from any goroutine). It reports
// whether the call was running.
func (ip *interp) interrupt(id int64) bool {
	return C.orq_interrupt(C.long(id), C.int(ip.tid)) != 0
}

// markDead records that the interpreter thread is stuck in code that
// cannot be interrupted; every later call fails fast.
func (ip *interp) markDead(reason string) {
	ip.deadOnce.Do(func() {
		ip.deadReason.Store(reason)
		close(ip.dead)
	})
}

func (ip *interp) isDead() (string, bool) {
	select {
	case <-ip.dead:
		s, _ := ip.deadReason.Load().(string)
		return s, true
	default:
		return "", false
	}
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orqest/sandbox/host"
	"github.com/orqest/sandbox/shared"
	"github.com/orqest/sandbox/shared/plugin"
)

// maxBatchLine caps one line of a batch: a body of the largest size a
// policy may allow, with its args and JSON escaping.
const maxBatchLine = 16 << 20

// batchLine is one line of `run --batch` input.
type batchLine struct {
	// ID is echoed on the result line, to match results that finish out of
	// order to their candidates.
	ID             string          `json:"id,omitempty"`
	Code           string          `json:"code"`
	Args           json.RawMessage `json:"args,omitempty"`
	AllowedImports []string        `json:"allowed_imports,omitempty"`
	// Dependencies are added to the --dep packages.
	Dependencies []string `json:"dependencies,omitempty"`
	// Timeout is a duration string ("500ms", "2s") or a number of seconds.
	Timeout  json.RawMessage `json:"timeout,omitempty"`
	MemoryMB int             `json:"memory_mb,omitempty"`
}

// batchOut is one line of `run --batch` output: the ExecutionResult's
// fields, plus the request's index and id. A request that could not run
// (a malformed line, a policy refusal, an infrastructure error) has Success
// false, the reason in error and its classes in error_class.
type batchOut struct {
	Index int    `json:"index"`
	ID    string `json:"id,omitempty"`
	shared.ExecutionResult
	ErrorClass []string `json:"error_class,omitempty"`
}

// runBatch is `run --batch FILE|-`: one host and one plugin for every line.
// It returns exitOK when every line has a result line (whatever the user
// code did), exitError when the input could not be read or any line could
// not run.
func runBatch(ctx context.Context, e *env, f execFlags, src string, concurrency int, user, session string) int {
	var in io.Reader
	if src == "-" {
		in = e.stdin
	} else {
		file, err := os.Open(src)
		if err != nil {
			fmt.Fprintf(e.stderr, "orqest-sandbox run: --batch: %v\n", err)
			return exitError
		}
		defer file.Close()
		in = file
	}
	h, sb, err := loadSandbox(ctx, f.config, f.sandbox)
	if err != nil {
		return reportErr(e, err)
	}
	defer h.Close()

	// Session tiers run the whole batch in one session.
	info, err := sb.Info(ctx)
	if err != nil {
		return reportErr(e, err)
	}
	if !info.Has(shared.CapSessions) {
		if err := refuseSessionless(sb, session, ""); err != nil {
			return reportErr(e, err)
		}
	} else {
		if user == "" {
			user = "anonymous"
		}
		open, err := sb.Open(ctx, shared.OpenRequest{UserID: user, SessionID: session})
		if err != nil {
			return reportErr(e, err)
		}
		session = open.SessionID
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := sb.CloseSession(cctx, open.SessionID); err != nil {
				fmt.Fprintf(e.stderr, "orqest-sandbox: closing session %s: %v\n", open.SessionID, err)
			}
		}()
	}

	ids := map[int]string{}
	var idsMu sync.Mutex
	var failed atomic.Bool
	var readErr error
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	reqs := func(yield func(shared.ExecuteRequest, error) bool) {
		r := bufio.NewReaderSize(in, 64<<10)
		for n, index := 1, 0; ; n++ {
			line, err := readLine(r, maxBatchLine)
			if errors.Is(err, io.EOF) && len(line) == 0 {
				return
			}
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, errLineTooLong) {
				readErr = err
				return
			}
			if err == nil && len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			req, id, lerr := batchRequest(f, line, n, err)
			req.UserID, req.SessionID, req.Stateful, req.Stateless = user, session, f.stateful, f.stateless
			idsMu.Lock()
			ids[index] = id
			idsMu.Unlock()
			index++
			if !yield(req, lerr) {
				return
			}
		}
	}
	sb.ExecuteEach(ctx, reqs, host.BatchOptions{Concurrency: concurrency, OnResult: func(r host.BatchResult) {
		idsMu.Lock()
		out := batchOut{Index: r.Index, ID: ids[r.Index], ExecutionResult: r.Result}
		delete(ids, r.Index)
		idsMu.Unlock()
		if r.Err != nil {
			failed.Store(true)
			out.ExecutionResult = shared.ExecutionResult{Output: json.RawMessage("null"), Error: r.Err.Error()}
			out.ErrorClass = plugin.ErrorClasses(r.Err)
		}
		if err := enc.Encode(out); err != nil {
			failed.Store(true)
		}
	}})
	if readErr != nil {
		fmt.Fprintf(e.stderr, "orqest-sandbox run: --batch: reading %s: %v\n", src, readErr)
		return exitError
	}
	if err := ctx.Err(); err != nil {
		fmt.Fprintf(e.stderr, "orqest-sandbox run: --batch: %v\n", err)
		return exitError
	}
	if failed.Load() {
		return exitError
	}
	return exitOK
}

// batchRequest decodes line n of a batch into a request; the flags give
// what a line leaves out (timeout, memory) and imports every line may use.
func batchRequest(f execFlags, line []byte, n int, readErr error) (shared.ExecuteRequest, string, error) {
	var req shared.ExecuteRequest
	if errors.Is(readErr, errLineTooLong) {
		return req, "", &shared.FieldError{Field: "line", Reason: fmt.Sprintf("line %d is longer than %d bytes", n, maxBatchLine)}
	}
	var l batchLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return req, "", &shared.FieldError{Field: "line", Reason: fmt.Sprintf("line %d is not a request object {\"code\", \"args\", \"allowed_imports\", \"dependencies\", \"timeout\", \"memory_mb\", \"id\"}: %v", n, err)}
	}
	if dec.More() {
		return req, l.ID, &shared.FieldError{Field: "line", Reason: fmt.Sprintf("line %d holds more than one JSON value", n)}
	}
	if missingCode(l.Code) {
		return req, l.ID, &shared.FieldError{Field: "code", Reason: fmt.Sprintf("code missing on line %d (required: code, the function body to run)", n)}
	}
	base, err := f.request(l.Code)
	if err != nil {
		return req, l.ID, &shared.FieldError{Field: "flags", Reason: err.Error()}
	}
	req = base
	req.AllowedImports = append(append([]string(nil), f.allow...), l.AllowedImports...)
	req.Dependencies = append(append([]string(nil), f.deps...), l.Dependencies...)
	if len(l.Args) > 0 {
		req.Args = l.Args
	}
	if l.MemoryMB != 0 {
		req.MemoryMB = l.MemoryMB
	}
	if len(l.Timeout) > 0 {
		d, err := parseTimeout(l.Timeout)
		if err != nil {
			return req, l.ID, &shared.FieldError{Field: "timeout", Reason: fmt.Sprintf("timeout on line %d: %v", n, err)}
		}
		req.Timeout = d
	}
	return req, l.ID, nil
}

// parseTimeout reads a line's timeout: "500ms"-style or seconds.
func parseTimeout(raw json.RawMessage) (time.Duration, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%q is not a positive duration such as \"500ms\" or \"2s\"", s)
		}
		return d, nil
	}
	secs, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || secs <= 0 || secs > 24*3600 {
		return 0, fmt.Errorf("%s is neither a duration string nor a positive number of seconds", raw)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line (without its newline) of at most max bytes; a
// longer one is consumed to its end and reported as errLineTooLong.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, errLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

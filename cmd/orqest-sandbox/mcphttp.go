package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// The HTTP face of `mcp serve --http`, around the SDK's Streamable handler.

// mcpSessionHeader is the Streamable HTTP transport's session header.
const mcpSessionHeader = "Mcp-Session-Id"

// jsonrpcInvalidRequest is JSON-RPC 2.0's "Invalid Request" error code.
const jsonrpcInvalidRequest = -32600

// requireMCPSession refuses a POST without an Mcp-Session-Id header unless
// it opens a session, as the Streamable HTTP transport says a server that
// keeps sessions does: HTTP 400, here with a JSON-RPC error (-32600,
// Invalid Request) naming the header. Left to the SDK, such a request
// would open a throwaway session and answer 200 with an error of code 0.
// What opens a session is an initialize request, or the server/discover
// probe of protocol revisions without sessions (the SDK answers it with
// the revisions this server speaks, and its client then initializes). A
// body that is no JSON-RPC goes on to the SDK, which refuses it itself.
func requireMCPSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get(mcpSessionHeader) != "" || r.Body == nil || sdkRefusesFirst(r) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, mcpMaxRequestBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		id, opens := opensMCPSession(body)
		if opens {
			next.ServeHTTP(w, r)
			return
		}
		writeJSONRPCError(w, http.StatusBadRequest, id, jsonrpcInvalidRequest,
			"Bad Request: "+mcpSessionHeader+" header is required: send initialize first, then every request with the Mcp-Session-Id its response carries")
	})
}

// sdkRefusesFirst reports whether the SDK's handler refuses r before it
// looks at sessions, so that its answer stands: a request reaching a
// loopback listener with a Host that is not loopback (DNS rebinding: 403),
// a Content-Type other than application/json (415), an Accept without
// both application/json and text/event-stream (400).
func sdkRefusesFirst(r *http.Request) bool {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(local.String()) && !isLoopback(r.Host) {
		return true
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return true
	}
	var jsonOK, streamOK bool
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(mt)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return !jsonOK || !streamOK
}

// isLoopback reports whether addr (host or host:port) is localhost or a
// loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// opensMCPSession reports whether the JSON-RPC message or batch body may go
// without a session (an initialize or server/discover among them, or a
// body that is not JSON-RPC, which the SDK refuses), and the id of a lone
// request, for the error response (null otherwise).
func opensMCPSession(body []byte) (id json.RawMessage, opens bool) {
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var msgs []message
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &msgs) != nil {
			return nil, true
		}
	} else {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return nil, true
		}
		msgs = []message{m}
	}
	for _, m := range msgs {
		if m.Method == "initialize" || m.Method == "server/discover" {
			return nil, true
		}
	}
	if len(msgs) == 1 {
		id = msgs[0].ID
	}
	return id, false
}

// jsonrpcErrorResponse is a JSON-RPC 2.0 error response.
type jsonrpcErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   jsonrpcError    `json:"error"`
}

type jsonrpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeJSONRPCError writes a JSON-RPC error response with HTTP status
// code; id is the request's (nil: null).
func writeJSONRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(jsonrpcErrorResponse{JSONRPC: "2.0", ID: id, Error: jsonrpcError{Code: code, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

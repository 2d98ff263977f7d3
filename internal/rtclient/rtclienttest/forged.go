// Package rtclienttest holds tests every plugin that runs the agent
// runtime (tier 2's container, a Kubernetes pod) runs against a real
// session of its own.
package rtclienttest

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orqest/sandbox/internal/rtclient"
	"github.com/orqest/sandbox/internal/rtproto"
	"github.com/orqest/sandbox/shared"
)

// ForgedTokens talks MCP to a bound runtime directly (its session's MCP
// connection s, signed with secret for user and session sid) with
// hand-made tokens: every forged, expired, mis-scoped or missing token is
// refused with ErrPermissionDenied, a valid agent token runs code but may
// not call the operator tool, an operator token may; agent_id is checked
// at the MCP boundary and dependencies fail closed.
func ForgedTokens(t *testing.T, s *mcp.ClientSession, secret []byte, user, sid string) {
	t.Helper()
	now := time.Now()
	claims := func(scope string, exp time.Time) rtproto.Claims {
		return rtproto.Claims{Scope: scope, Session: sid, RegisteredClaims: jwt.RegisteredClaims{
			Issuer: rtproto.Issuer, Subject: user, Audience: jwt.ClaimStrings{rtproto.Audience},
			IssuedAt: jwt.NewNumericDate(exp.Add(-time.Minute)), ExpiresAt: jwt.NewNumericDate(exp),
		}}
	}
	sign := func(c rtproto.Claims, key []byte) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims("", now.Add(time.Minute))).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	otherSession := claims("", now.Add(time.Minute))
	otherSession.Session = "other"
	good, _ := rtproto.Mint(secret, user, sid, "", time.Minute)
	operator, _ := rtproto.Mint(secret, user, sid, rtproto.ScopeOperator, time.Minute)
	longLived, _ := rtproto.Mint(secret, user, sid, "", time.Hour)

	call := func(tool, tok string) *mcp.CallToolResult {
		t.Helper()
		params := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}}
		if tool == rtproto.ToolExecute {
			params.Arguments = rtproto.ExecuteArgs{Code: "return 7"}
		}
		if tok != "" {
			params.Meta = mcp.Meta{rtproto.MetaAuthorization: "Bearer " + tok}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := s.CallTool(ctx, params)
		if err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		return out
	}
	rejected := map[string]string{
		"missing":       "",
		"alg none":      none,
		"wrong key":     sign(claims("", now.Add(time.Minute)), []byte("0123456789abcdef0123456789abcdef")),
		"expired":       sign(claims("", now.Add(-time.Minute)), secret),
		"other session": sign(otherSession, secret),
		"bogus scope":   sign(claims("root", now.Add(time.Minute)), secret),
		"too long ttl":  longLived,
		"garbage":       "not.a.jwt",
	}
	names := make([]string, 0, len(rejected))
	for n := range rejected {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out := call(rtproto.ToolExecute, rejected[n])
		if !out.IsError || !strings.Contains(rtclient.ToolErr(out).Error(), "unauthorized") || !errors.Is(rtclient.ToolErr(out), shared.ErrPermissionDenied) {
			t.Errorf("%s token: execute_python not refused with ErrPermissionDenied: %+v", n, out)
		}
	}
	if out := call(rtproto.ToolExecute, good); out.IsError {
		t.Errorf("valid token refused: %v", rtclient.ToolErr(out))
	}
	// Scope: agent (explicit or missing) may not call the operator tool.
	if out := call(rtproto.ToolInfo, good); !out.IsError || !strings.Contains(rtclient.ToolErr(out).Error(), "operator scope") {
		t.Errorf("agent-scope token reached runtime_info: %+v", out)
	}
	if out := call(rtproto.ToolInfo, operator); out.IsError {
		t.Errorf("operator token refused on runtime_info: %v", rtclient.ToolErr(out))
	}

	// agent_id is checked at the MCP boundary.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := s.CallTool(ctx, &mcp.CallToolParams{
		Name:      rtproto.ToolExecute,
		Meta:      mcp.Meta{rtproto.MetaAuthorization: "Bearer " + good},
		Arguments: rtproto.ExecuteArgs{Code: "return 1", AgentID: "../escape"},
	})
	if err != nil || !out.IsError || !errors.Is(rtclient.ToolErr(out), shared.ErrInvalidArgument) {
		t.Errorf("agent_id ../escape: err=%v out=%+v", err, out)
	}
	// dependencies fail closed: nothing is in allowed_packages here.
	out, err = s.CallTool(ctx, &mcp.CallToolParams{
		Name:      rtproto.ToolExecute,
		Meta:      mcp.Meta{rtproto.MetaAuthorization: "Bearer " + good},
		Arguments: rtproto.ExecuteArgs{Code: "return 1", Dependencies: []string{"requests"}},
	})
	if err != nil || !out.IsError || !errors.Is(rtclient.ToolErr(out), shared.ErrPermissionDenied) {
		t.Errorf("dependencies: err=%v out=%+v", err, out)
	}
}

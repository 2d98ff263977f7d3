package host

import (
	"context"
	"errors"
	"testing"

	"github.com/orqest/sandbox/shared"
)

// The host refuses file calls it can judge before the plugin: no session
// (a FieldError on session_id), an unclean path (on path), a plugin
// without the files capability (ErrNotSupported).
func TestFileCallsRefusedBeforeThePlugin(t *testing.T) {
	h := newHost(t, `sandbox "a" { plugin = "subprocess" }`)
	sb := defaultSandbox(t, h)
	ctx := context.Background()
	var fe *shared.FieldError
	if _, err := sb.PutFile(ctx, shared.PutFileRequest{Path: "a.txt", Data: []byte("x")}); !errors.As(err, &fe) || fe.Field != "session_id" {
		t.Errorf("no session: %v", err)
	}
	if _, err := sb.GetFile(ctx, shared.GetFileRequest{SessionID: "s-1", Path: "../a"}); !errors.As(err, &fe) || fe.Field != "path" {
		t.Errorf("path ../a: %v", err)
	}
	if _, err := sb.ListFiles(ctx, shared.ListFilesRequest{SessionID: "s-1"}); !errors.Is(err, shared.ErrNotSupported) {
		t.Errorf("tier 1 (no files capability): %v, want ErrNotSupported", err)
	}
}

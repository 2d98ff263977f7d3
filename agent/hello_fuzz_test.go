package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/orqest/sandbox/internal/rtproto"
)

// FuzzReadHello: the hello line reader never panics; what it accepts has
// a secret of at least rtproto.MinSecretBytes and a user and session that
// pass rtproto.CheckID, and encodes back to a line it reads as the same
// hello; it consumes the first line and nothing after it (the MCP traffic
// that follows is left to the transport), and zeroes the line in the
// reader's buffer.
func FuzzReadHello(f *testing.F) {
	secret := `"` + strings.Repeat("QUFB", 11) + `"`
	for _, s := range []string{
		`{"secret":` + secret + `,"user":"u","session":"s"}` + "\n",
		`{"secret":` + secret + `,"user":"alice","session":"s-1","promotion":{"policy":"threshold","threshold":3},"allowed_packages":["numpy"],"wheel_dir":"/opt/orqest/wheels","native_dir":"/opt/orqest/native"}` + "\n" +
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}` + "\n",
		`{"secret":` + secret + `,"user":"u","session":"s"}` + "\r\n" + "rest",
		`{"secret":` + secret + `,"user":"u","session":"s"}`,
		`{"secret":"QUFB","user":"u","session":"s"}` + "\n",
		`{"secret":` + secret + `,"user":"../u","session":"s"}` + "\n",
		`{"secret":` + secret + `,"user":"u","session":""}` + "\n",
		`{"secret":` + secret + `,"user":"u","session":"s","user":"../x"}` + "\n",
		`{"secret":"!!!!","user":"u","session":"s"}` + "\n",
		`{"secret":null,"user":"u","session":"s"}` + "\n",
		`{"secret":` + secret + `,"user":"u","session":"s"} {}` + "\n",
		`[]` + "\n",
		"not json\n",
		"\n",
		"",
		`{"secret":"` + strings.Repeat("A", 70000) + `","user":"u","session":"s"}` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		src := bytes.Clone(in)
		r := bufio.NewReaderSize(bytes.NewReader(src), 64<<10)
		h, err := readHello(r)
		if err != nil {
			return
		}
		nl := bytes.IndexByte(in, '\n')
		if nl < 0 {
			t.Fatalf("accepted a hello without its newline: %q", in)
		}
		if len(h.Secret) < rtproto.MinSecretBytes {
			t.Fatalf("accepted a %d-byte secret", len(h.Secret))
		}
		if rtproto.CheckID("user", h.User) != nil || rtproto.CheckID("session", h.Session) != nil {
			t.Fatalf("accepted user %q session %q", h.User, h.Session)
		}
		if buf := reflect.ValueOf(r).Elem().FieldByName("buf").Bytes(); len(buf) > nl && bytes.Count(buf[:nl+1], []byte{0}) != nl+1 {
			t.Fatalf("the hello line is still in the reader's buffer: %q", buf[:nl+1])
		}
		rest, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rest, in[nl+1:]) {
			t.Fatalf("left %q after the hello, want %q", rest, in[nl+1:])
		}
		line, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		h2, err := readHello(bufio.NewReader(bytes.NewReader(append(line, '\n'))))
		if err != nil {
			t.Fatalf("the hello encoded back is refused: %v\n%s", err, line)
		}
		if again, _ := json.Marshal(h2); !bytes.Equal(again, line) {
			t.Fatalf("encoded back and read again: %s, want %s", again, line)
		}
	})
}

package runner_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/orqest/sandbox/runner"
)

// urllib.parse only parses strings: a policy listing urllib gets it (the
// package's reviewed surface is its parse submodule), as an LLM writes it.
func TestURLParseRuns(t *testing.T) {
	code := `import urllib.parse
from urllib.parse import urlparse, quote, urlencode, parse_qs, urljoin
u = urlparse("https://example.com/a b?x=1&y=2#frag")
q = parse_qs(u.query)
return {"host": u.netloc, "path": quote("/a b"), "q": q, "enc": urlencode({"k": "v w", "n": 1}),
        "join": urljoin("https://example.com/a/", "../b"), "plus": urllib.parse.quote_plus("a b&c")}`
	resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: []string{"urllib"}})
	wantOutput(t, resp, `{"host": "example.com", "path": "/a%20b", "q": {"x": ["1"], "y": ["2"]}, "enc": "k=v+w&n=1", "join": "https://example.com/b", "plus": "a+b%26c"}`)
}

// With the static rules out of the way (a table that lets open and the
// module dunders through), a policy listing urllib still reaches no
// network module and no module urllib.parse imported; and listing urllib
// does not switch off the hook's open and socket checks (urllib is no
// longer an OS module, urllib.request is).
func TestURLLibStaysParseOnlyWithoutStaticRules(t *testing.T) {
	rules := weakRules(t, []string{"__dict__"}, []string{"open", "sys", "socket"}, []string{"open"})
	for _, code := range []string{
		"import urllib.request\nreturn 1",
		"from urllib import request\nreturn 1",
		"from urllib.request import urlopen\nreturn 1",
		"import urllib.error\nreturn 1",
		"import urllib\nreturn urllib.request.urlopen('http://127.0.0.1:9/')",
		"import urllib.parse\nreturn urllib.parse.sys.modules",
		"import urllib.parse\nreturn str(urllib.parse.__dict__['_coerce_args'])",
	} {
		resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: []string{"urllib"}, Rules: rules})
		if resp.Success {
			t.Errorf("%q: want a refusal, got %s", code, resp.Output)
		}
	}
	secret := "CANARY-urllib-open"
	f := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(f, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, _, _ := run(t, runner.Request{Code: "return open(" + strconvQuote(f) + ").read()", AllowedImports: []string{"urllib", "io"}, Rules: rules})
	if resp.Success || strings.Contains(string(resp.Output)+resp.Error, secret) {
		t.Fatalf("open with urllib and io allowed: success=%v output=%s error=%s", resp.Success, resp.Output, resp.Error)
	}
}

// io's in-memory streams are what csv code writes to; io.open and the
// file classes are not in its surface.
func TestIOStringIORuns(t *testing.T) {
	code := `import csv, io
from io import StringIO, BytesIO
buf = io.StringIO()
w = csv.DictWriter(buf, fieldnames=["name", "n"])
w.writeheader()
w.writerow({"name": "a", "n": 1})
rows = list(csv.DictReader(StringIO(buf.getvalue())))
b = BytesIO()
b.write("é".encode())
b.seek(0, io.SEEK_SET)
text = io.TextIOWrapper(io.BytesIO("x,y\n1,2\n".encode()), encoding="utf-8").read()
return {"rows": rows, "bytes": b.read().decode(), "text": text}`
	resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: []string{"csv", "io"}})
	wantOutput(t, resp, `{"rows": [{"name": "a", "n": "1"}], "bytes": "é", "text": "x,y\n1,2\n"}`)
}

// With the static rules out of the way, io hands out no file access: no
// open, open_code or FileIO, nothing through the streams' buffers, and
// _io (whose open is io.open) stays refused.
func TestIOHasNoFilesWithoutStaticRules(t *testing.T) {
	secret := "CANARY-io-open"
	f := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(f, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	rules := weakRules(t, []string{"__dict__", "__class__", "__module__"}, []string{"io"}, nil)
	q := strconvQuote(f)
	for _, code := range []string{
		"import io\nreturn io.open(" + q + ").read()",
		"from io import open\nreturn open(" + q + ").read()",
		"from io import FileIO\nreturn FileIO(" + q + ").read()",
		"import io\nreturn io.open_code(" + q + ").read()",
		"import io\nreturn io.__dict__['FileIO'](" + q + ").read()",
		"import io\nreturn io.abc",
		"import _io\nreturn _io.open(" + q + ").read()",
		"import io\nreturn io.TextIOWrapper(io.BytesIO(b''), encoding='utf-8').buffer.raw",
	} {
		resp, _, _ := run(t, runner.Request{Code: code, AllowedImports: []string{"io"}, Rules: rules})
		if resp.Success || strings.Contains(string(resp.Output)+resp.Error, secret) {
			t.Errorf("%q: want a refusal, got success=%v %s %s", code, resp.Success, resp.Output, resp.Error)
		}
	}
}

// from m import x falls back to sys.modules["m.x"] when m's view has no
// x: with the static rules out of the way, that handed out the real
// json.decoder (its __builtins__, re and scanner). The shim refuses a
// name the view does not have; a reviewed submodule still imports.
func TestFromImportGetsNoHiddenSubmodule(t *testing.T) {
	rules := weakRules(t, []string{"__dict__"}, nil, nil)
	for _, c := range []struct{ code, allow string }{
		{"from json import decoder\nreturn sorted(decoder.__dict__)", "json"},
		{"from urllib import request\nreturn 1", "urllib"},
		{"from collections import abc, nothing\nreturn 1", "collections"},
	} {
		resp, _, _ := run(t, runner.Request{Code: c.code, AllowedImports: []string{c.allow}, Rules: rules})
		if resp.Success || !strings.Contains(resp.Error, "reviewed surface") {
			t.Errorf("%q: want the shim's refusal, got success=%v %s %s", c.code, resp.Success, resp.Output, resp.Error)
		}
	}
	resp, _, _ := run(t, runner.Request{Code: "from collections import abc\nfrom urllib import parse\nreturn [abc.Mapping.__name__, parse.quote('a b')]",
		AllowedImports: []string{"collections", "urllib"}})
	wantOutput(t, resp, `["Mapping", "a%20b"]`)
}

// With classes, the user's own attributes may be named like a frame's or a
// code object's (self.co_name, self.f_back): the runner lets such a read
// through only of what the body made.
func TestOwnAttributesNamedLikeInternals(t *testing.T) {
	code := "class Fn:\n    def __init__(self, name):\n        self.co_name = name\n        self.co_code = b'x'\n        self.f_back = None\n" +
		"    def key(self):\n        return [self.co_name, self.co_code.decode(), self.f_back]\nreturn Fn('f').key()"
	resp, _, _ := run(t, runner.Request{Code: code, Classes: true})
	wantOutput(t, resp, `["f", "x", null]`)
}

// With classes on the static rules let g().gi_frame through (g might be
// the user's object): the runner's read guard alone refuses a generator's
// frame and a traceback's frame, whatever the static rules say.
func TestOwnAttributeGuardHoldsAlone(t *testing.T) {
	rules := weakRules(t, []string{"__traceback__"}, nil, nil)
	for _, code := range []string{
		"def g():\n    yield 1\nreturn str(g().gi_frame.f_globals)",
		"def g():\n    yield 1\nx = g()\nreturn str(x.gi_code.co_consts)",
		"try:\n    1 / 0\nexcept Exception as e:\n    return str(e.__traceback__.tb_frame.f_back.f_globals)",
		"async def c():\n    pass\nx = c()\nreturn str(x.cr_frame)",
	} {
		resp, _, _ := run(t, runner.Request{Code: code, Classes: true, Rules: rules})
		if resp.Success || !strings.Contains(resp.Error, "not readable") {
			t.Errorf("%q: want the read guard's refusal, got success=%v %s %s", code, resp.Success, resp.Output, resp.Error)
		}
	}
}

// vars(self) and hasattr(obj, "__dict__"), as LLM code writes them with
// classes on: vars is a copy of the object's attributes.
func TestVarsOfOwnInstancesRuns(t *testing.T) {
	code := "class P:\n    def __init__(self, **kw):\n        for k, v in kw.items():\n            setattr(self, k, v)\n    def to_dict(self):\n        return vars(self)\n" +
		"def f():\n    pass\nf.tag = 1\nx = P(a=1, b='two')\nd = vars(x)\nd['c'] = 3\nreturn [x.to_dict(), sorted(vars(x)), vars(f), hasattr(x, '__dict__'), hasattr(1, '__dict__'), hasattr(x, 'c')]"
	resp, _, _ := run(t, runner.Request{Code: code, Classes: true})
	wantOutput(t, resp, `[{"a": 1, "b": "two"}, ["a", "b"], {"tag": 1}, true, false, false]`)
}

// A weakened table lets vars() through (the static rules want one
// argument): the runner alone refuses a namespace, a module
// view's, a class's (a mappingproxy of its methods and descriptors), an
// exception's and a stdlib object's dict; and what vars hands out is a
// copy, so no dunder key reaches an instance (copy.copy would call an
// instance's __reduce_ex__).
func TestVarsGuardHoldsAlone(t *testing.T) {
	// vars is no forbidden name here: vars() passes the static rules
	rules := weakRules(t, nil, []string{"vars"}, nil)
	for _, c := range []struct{ code, want string }{
		{"return vars()", "takes one argument"},
		{"import json\nreturn str(vars(json))", "readable only of"},
		{"class C:\n    def m(self):\n        pass\nreturn str(vars(C))", "readable only of"},
		{"class C:\n    pass\nreturn str(vars(type(C())))", "readable only of"},
		{"class E(Exception):\n    pass\nreturn str(vars(E('x')))", "readable only of"},
		{"import decimal\nreturn str(vars(decimal.getcontext()))", "readable only of"},
		{"import copy\nclass P:\n    pass\np = P()\nvars(p)[''.join(['__reduce', '_ex__'])] = lambda proto: (len, ('abc',))\nreturn type(copy.copy(p)).__name__", "P"},
	} {
		resp, _, _ := run(t, runner.Request{Code: c.code, Classes: true, AllowedImports: []string{"json", "decimal", "copy"}, Rules: rules})
		if c.want == "P" {
			// the copy is a P, not len('abc')
			if !resp.Success || string(resp.Output) != `"P"` {
				t.Errorf("%q: vars handed out the real dict: success=%v %s %s", c.code, resp.Success, resp.Output, resp.Error)
			}
			continue
		}
		if resp.Success || !strings.Contains(resp.Error, c.want) {
			t.Errorf("%q: want a refusal (%s), got success=%v %s %s", c.code, c.want, resp.Success, resp.Output, resp.Error)
		}
	}
}

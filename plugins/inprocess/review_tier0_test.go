package inprocess

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/orqest/sandbox/shared"
)

// withClasses is a tier-0 backend configured as the host configures one
// by default: classes on.
func withClasses(t *testing.T) *Backend {
	t.Helper()
	b := NewBackend(hclog.NewNullLogger())
	if _, err := b.Configure(context.Background(), shared.ConfigureRequest{Unsafe: true, Classes: true}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	return b
}

// Payloads of an attack review of tier 0 with its defaults (classes on):
// what one call can leave for the next caller of the shared interpreter.

// TestReviewTier0CallCannotRewriteTheNextCallersCalendar: a class whose
// namespace the code chose, built outside the code's frame (the metaclass
// __new__ of type(collections.abc.Mapping), or type() called back through
// functools.partial by a dataclass default_factory), took __reduce_ex__;
// copy.copy's reconstruction then set calendar.day_name's format, and
// every later caller's calendar.day_name[0] said HACKED. The C class
// guard compiled into the plugin refuses both; the next caller reads
// Monday.
func TestReviewTier0CallCannotRewriteTheNextCallersCalendar(t *testing.T) {
	b := withClasses(t)
	allowed := []string{"collections", "copy", "calendar", "dataclasses", "functools"}
	ns := "ns = {'__reduce_ex__': lambda self, p: (lambda: calendar.day_name, (), (None, {'format': 'HACKED'}))}\n"
	for _, c := range []struct{ name, code, want string }{
		{"ABCMeta alias", "import collections.abc, copy, calendar\n" + ns +
			"R = type(collections.abc.Mapping)('R', (), ns)\ncopy.copy(R())\nreturn calendar.day_name[0]", "may not define __reduce_ex__"},
		{"default_factory partial", "import dataclasses, functools, copy, calendar\n" + ns +
			"@dataclasses.dataclass\nclass H:\n    r: object = dataclasses.field(default_factory=functools.partial(type(int), 'R', (), ns))\n" +
			"copy.copy(H().r())\nreturn calendar.day_name[0]", "may not bind __reduce_ex__"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := execute(t, b, shared.ExecuteRequest{Code: c.code, AllowedImports: allowed})
			if res.Success || !strings.Contains(res.Error, c.want) {
				t.Fatalf("want %q, got success=%v %s %s: %s", c.want, res.Success, res.Output, res.ErrorKind, res.Error)
			}
			next := execute(t, b, shared.ExecuteRequest{Code: "import calendar\nreturn calendar.day_name[0]", AllowedImports: allowed})
			if !next.Success || string(next.Output) != `"Monday"` {
				t.Fatalf("the next caller's calendar: %s %s %s", next.Output, next.ErrorKind, next.Error)
			}
		})
	}
}

// TestReviewTier0UserStringCannotReadThePluginEnvironment: the format
// guard let collections.UserString's format walk attribute fields from
// the library's frame; on tier 0 that read the plugin process's
// environment. Refused now; the benign UserString formatting still works.
func TestReviewTier0UserStringCannotReadThePluginEnvironment(t *testing.T) {
	t.Setenv("ORQ_REVIEW_CANARY", "canary-7f3e")
	b := withClasses(t)
	allowed := []string{"collections", "json"}
	res := execute(t, b, shared.ExecuteRequest{Code: "import collections, json\nreturn collections.UserString('{0.__globals__[codecs].sys.modules[os].environ[ORQ_REVIEW_CANARY]}').format(json.loads)", AllowedImports: allowed})
	if res.Success || strings.Contains(string(res.Output)+res.Error, "canary-7f3e") || !strings.Contains(res.Error, "reads the attribute") {
		t.Fatalf("want the format guard's refusal, got success=%v %s %s: %s", res.Success, res.Output, res.ErrorKind, res.Error)
	}
	res = execute(t, b, shared.ExecuteRequest{Code: "import collections\nreturn collections.UserString('{0[k]}-{n}').format({'k': 'v'}, n=args['n'])", AllowedImports: allowed, Args: json.RawMessage(`{"n": 3}`)})
	if !res.Success || string(res.Output) != `"v-3"` {
		t.Fatalf("benign UserString.format: %s %s %s", res.Output, res.ErrorKind, res.Error)
	}
}

// TestReviewTier0EscapedExceptionFormattedArmed: an exception whose
// __str__ raised a BaseException escaped the runner; embed.c disarmed the
// hook and only then took the escaped object's repr, so the code's
// __repr__ ran unarmed after its call: it built a class with
// __reduce_ex__ and had copy rewrite calendar.day_name for every later
// caller. The runner now reports the failed text as a runtime error, and
// embed.c formats an escaped exception (and frees what it holds) while
// the call is still armed and timed. The next caller reads Monday.
func TestReviewTier0EscapedExceptionFormattedArmed(t *testing.T) {
	b := withClasses(t)
	allowed := []string{"copy", "calendar"}
	code := "import copy, calendar\nclass Bye(BaseException):\n    def __str__(self):\n        raise Bye()\n    def __repr__(self):\n" +
		"        R = type(int)('R', (), {'__reduce_ex__': lambda self, p: (lambda: calendar.day_name, (), (None, {'format': 'UNARMED'}))})\n" +
		"        copy.copy(R())\n        return 'Bye'\nclass E(Exception):\n    def __str__(self):\n        raise Bye()\nraise E()"
	res := execute(t, b, shared.ExecuteRequest{Code: code, AllowedImports: allowed})
	if res.Success || res.ErrorKind != shared.KindRuntime || !strings.Contains(res.Error, "<exception str() failed>") {
		t.Fatalf("want a runtime error, got success=%v %s %s: %s", res.Success, res.Output, res.ErrorKind, res.Error)
	}
	next := execute(t, b, shared.ExecuteRequest{Code: "import calendar\nreturn calendar.day_name[0]", AllowedImports: allowed})
	if !next.Success || string(next.Output) != `"Monday"` {
		t.Fatalf("the next caller's calendar: %s %s %s", next.Output, next.ErrorKind, next.Error)
	}
}

// TestReviewTier0EqualityKeyedCachesEmptied: a call's keys whose __eq__
// says yes to anything (str subclasses, an object with __hash__ of a
// string) filled the stdlib caches every call shares; the next caller's
// lookups matched them: struct.pack('<i', 1) packed as '>q',
// strptime('%Y-%m-%d') parsed with '%Y-%d-%m', ZoneInfo('Europe/Paris')
// was UTC, typing.Annotated[int, 'meta'] held the earlier call's object
// and re's sub(r'\1-x') used the earlier call's template. The reset
// after every call empties those caches; the next caller's results are
// its own. (Others stay: ipaddress's netmask and lru_cache'd properties,
// docs/tier0.md.)
func TestReviewTier0EqualityKeyedCachesEmptied(t *testing.T) {
	b := withClasses(t)
	allowed := []string{"struct", "datetime", "zoneinfo", "typing", "re"}
	poison := `import struct, datetime, zoneinfo, typing, re
class S(str):
    def __eq__(self, o):
        return True
class K0(S):
    def __hash__(self):
        return hash('<i')
class K1(S):
    def __hash__(self):
        return hash('%Y-%m-%d')
class K2(S):
    def __hash__(self):
        return hash('Europe/Paris')
class K3(S):
    def __hash__(self):
        return hash('\\1-x')
class M:
    def __eq__(self, o):
        return True
    def __hash__(self):
        return hash('meta')
struct.pack(K0('>q'), 1)
datetime.datetime.strptime('2026-12-07', K1('%Y-%d-%m'))
zoneinfo.ZoneInfo(K2('UTC'))
typing.Annotated[int, M()]
re.compile('(a)(b)').sub(K3('\\2-EVIL'), 'ab')
return 1`
	if res := execute(t, b, shared.ExecuteRequest{Code: poison, AllowedImports: allowed}); !res.Success {
		t.Fatalf("the poisoning call: %s %s %s", res.Output, res.ErrorKind, res.Error)
	}
	res := execute(t, b, shared.ExecuteRequest{Code: "import struct, datetime, zoneinfo, typing, re\nreturn [list(struct.pack('<i', 1)), str(datetime.datetime.strptime('2026-07-12', '%Y-%m-%d').date()), str(zoneinfo.ZoneInfo('Europe/Paris')), str(typing.get_args(typing.Annotated[int, 'meta'])[1]), re.compile('(a)(b)').sub(r'\\1-x', 'ab')]", AllowedImports: allowed})
	if !res.Success || string(res.Output) != `[[1, 0, 0, 0], "2026-07-12", "Europe/Paris", "meta", "a-x"]` {
		t.Fatalf("the next caller got an earlier call's cache entries: %s %s %s", res.Output, res.ErrorKind, res.Error)
	}
}

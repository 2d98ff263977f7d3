package validator

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/orqest/sandbox/rules"
)

// Every field of Options is part of its Digest: a field the JSON encoding
// leaves out (unexported) or that does not change the digest fails here.
func TestOptionsDigestCoversEveryField(t *testing.T) {
	base := Options{}.Digest()
	var o Options // its fields are set one at a time
	var leaves func(prefix string, v reflect.Value)
	leaves = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			f, fv := v.Type().Field(i), v.Field(i)
			name := prefix + f.Name
			if !f.IsExported() {
				t.Errorf("Options field %s is unexported: Digest would not see it", name)
				continue
			}
			if fv.Kind() == reflect.Struct {
				leaves(name+".", fv)
				continue
			}
			old := reflect.New(fv.Type()).Elem()
			old.Set(fv)
			switch fv.Kind() {
			case reflect.Bool:
				fv.SetBool(true)
			case reflect.Int, reflect.Int64:
				fv.SetInt(7)
			case reflect.String:
				fv.SetString("x")
			case reflect.Slice:
				fv.Set(reflect.ValueOf([]string{"json"}))
			default:
				t.Errorf("Options field %s: kind %s is not covered by this test", name, fv.Kind())
				continue
			}
			if d := o.Digest(); d == base {
				t.Errorf("setting Options.%s does not change the digest", name)
			}
			fv.Set(old)
		}
	}
	leaves("", reflect.ValueOf(&o).Elem())
}

func TestVerdictBinding(t *testing.T) {
	ctx := context.Background()
	v := New()
	good := "return 1 + 1\n"
	bad := "return open('/etc/passwd').read()\n"
	imps := []string{"json", "math"}
	f := Features{}
	found, verdict := v.Accept(ctx, good, imps, f)
	if len(found) > 0 || verdict == nil {
		t.Fatalf("Accept(good) = %v, %v", found, verdict)
	}
	if verdict.Rules != rules.Version() || len(verdict.Rules) != 64 {
		t.Fatalf("verdict names rules %q, want %q", verdict.Rules, rules.Version())
	}
	if found, verdict := v.Accept(ctx, bad, imps, f); len(found) == 0 || verdict != nil {
		t.Fatalf("Accept(bad) = %v, %v: want findings and no verdict", found, verdict)
	}

	w := New() // the backend's own validator
	if !w.Trusts(verdict, good, []string{"math", "json", "math"}, f) {
		t.Fatal("the same body, rules and options (the allowlist as a set) is not trusted")
	}
	other := func(mod func(*Options)) string {
		o := w.Options(imps, f)
		mod(&o)
		return o.Digest()
	}
	for _, c := range []struct {
		name    string
		code    string
		imps    []string
		f       Features
		forge   func(vd *shallowVerdict)
		trusted bool
	}{
		{name: "another body", code: bad, imps: imps},
		{name: "another allowlist", code: good, imps: []string{"json"}},
		{name: "classes on", code: good, imps: imps, f: Features{Classes: true}},
		{name: "another rules version", code: good, imps: imps, forge: func(vd *shallowVerdict) { vd.Rules = "0" + vd.Rules[1:] }},
		{name: "another options digest", code: good, imps: imps, forge: func(vd *shallowVerdict) {
			vd.Options = other(func(o *Options) { o.Timeout = time.Hour })
		}},
		{name: "a verdict for another body relabelled", code: bad, imps: imps, forge: func(vd *shallowVerdict) {}},
	} {
		vd := *verdict
		if c.forge != nil {
			s := shallowVerdict{Rules: vd.Rules, Options: vd.Options}
			c.forge(&s)
			vd.Rules, vd.Options = s.Rules, s.Options
		}
		if w.Trusts(&vd, c.code, c.imps, c.f) {
			t.Errorf("%s: trusted", c.name)
		}
		before := w.Stats()
		found, trusted := w.CheckTrusting(ctx, c.code, c.imps, c.f, &vd)
		after := w.Stats()
		if trusted || after.Checked != before.Checked+1 || after.Trusted != before.Trusted {
			t.Errorf("%s: CheckTrusting trusted=%v, stats %+v -> %+v: want a check of its own", c.name, trusted, before, after)
		}
		if c.code == bad && len(found) == 0 {
			t.Errorf("%s: the bad body passed", c.name)
		}
	}
	if w.Trusts(nil, good, imps, f) {
		t.Error("a nil verdict is trusted")
	}
	before := w.Stats()
	if found, trusted := w.CheckTrusting(ctx, good, imps, f, verdict); !trusted || len(found) > 0 {
		t.Fatalf("CheckTrusting(good, its verdict) = %v, %v", found, trusted)
	}
	if after := w.Stats(); after.Checked != before.Checked || after.Trusted != before.Trusted+1 {
		t.Fatalf("stats %+v -> %+v: want one trusted and no check", before, after)
	}
}

type shallowVerdict struct{ Rules, Options string }

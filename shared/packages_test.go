package shared

import (
	"errors"
	"strings"
	"testing"
)

func TestNormalizePackageName(t *testing.T) {
	for in, want := range map[string]string{"Foo_Bar": "foo-bar", "foo.bar": "foo-bar", "foo--_.bar": "foo-bar", "six": "six"} {
		if got := NormalizePackageName(in); got != want {
			t.Errorf("%q: got %q want %q", in, got, want)
		}
	}
}

func TestCheckDependencies(t *testing.T) {
	allowed := []string{"Orq_Demo", "six"}
	rs, err := CheckDependencies([]string{"orq-demo", "six==1.16.0", "orq.demo"}, allowed)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].String() != "orq-demo" || rs[1].String() != "six==1.16.0" {
		t.Fatalf("got %v", rs)
	}
	_, err = CheckDependencies([]string{"six", "requests"}, allowed)
	if !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), `"requests"`) {
		t.Fatalf("requests: want ErrPermissionDenied naming it, got %v", err)
	}
	if _, err := CheckDependencies([]string{"six"}, nil); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("empty allowlist must refuse: %v", err)
	}
	for _, bad := range []string{"", "../x", "six>=1", "six[extra]", "https://x/y.whl", "/tmp/x.whl", "six==", "six; python_version<'3'"} {
		if _, err := CheckDependencies([]string{bad}, []string{"six"}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%q: want ErrInvalidArgument, got %v", bad, err)
		}
	}
	if rs, err := CheckDependencies(nil, nil); err != nil || rs != nil {
		t.Fatal("no dependencies is fine")
	}
}

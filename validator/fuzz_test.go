package validator

import (
	"context"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzCheck: the validator never panics or hangs, and every finding names a
// described rule at a valid position.
func FuzzCheck(f *testing.F) {
	for _, c := range attacks {
		f.Add(c.code)
	}
	for _, c := range benign {
		f.Add(c.code)
	}
	for _, c := range extraDiff {
		f.Add(c.code)
	}
	v := New(WithTimeout(2 * time.Second))
	f.Fuzz(func(t *testing.T, code string) {
		start := time.Now()
		fs := v.Check(context.Background(), code, []string{"re", "json"})
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("took %v", d)
		}
		lines := 1
		for i := 0; i < len(code); i++ {
			if code[i] == '\n' || (code[i] == '\r' && (i+1 >= len(code) || code[i+1] != '\n')) {
				lines++
			}
		}
		for _, fd := range fs {
			if _, _, ok := RuleDescription(fd.Rule); !ok {
				t.Fatalf("undescribed rule %q", fd.Rule)
			}
			if fd.Line < 1 || fd.Column < 1 || (utf8.ValidString(code) && fd.Line > lines) {
				t.Fatalf("bad position %d:%d (lines=%d): %+v", fd.Line, fd.Column, lines, fd)
			}
		}
	})
}

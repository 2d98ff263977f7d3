package validator

import (
	"context"
	"strings"
	"testing"
)

// TestNonPrintable: what CPython's tokenizer refuses as a non-printable
// character outside strings and comments, the Go checker refuses too, naming
// the code point; inside a string's text or a comment both accept it.
// TestDifferential runs the same inputs through CPython.
func TestNonPrintable(t *testing.T) {
	v := New()
	seen := 0
	for _, c := range extraDiff {
		if !printableCases[c.name] {
			continue
		}
		seen++
		fs := v.Check(context.Background(), c.code, c.allow)
		if strings.HasSuffix(c.name, " ok") {
			if len(fs) != 0 {
				t.Errorf("%s: rejected: %v", c.name, fs)
			}
			continue
		}
		named := false
		for _, f := range fs {
			named = named || f.Rule == RuleParseError && strings.Contains(f.Message, "invalid non-printable character U+")
		}
		if !named {
			t.Errorf("%s: want a parse-error naming the code point, got %v", c.name, fs)
		}
	}
	if seen != len(printableCases) {
		t.Fatalf("%d of %d cases found in extraDiff", seen, len(printableCases))
	}
}

var printableCases = map[string]bool{
	"vertical tab between tokens": true, "vertical tab as indent": true, "leading BOM": true,
	"BOM between tokens": true, "no-break space": true, "zero-width space": true, "line separator": true,
	"DEL": true, "vertical tab in string ok": true, "vertical tab in comment ok": true,
	"no-break space in string ok": true, "zero-width space in comment ok": true,
}

// TestNonPrintablePosition: the finding points at the character.
func TestNonPrintablePosition(t *testing.T) {
	fs := New().Check(context.Background(), "x = 1\ny =\u00a02\nreturn x", nil)
	if len(fs) == 0 || fs[0].Line != 2 || fs[0].Column != 4 || !strings.Contains(fs[0].Message, "U+00A0") {
		t.Fatalf("got %+v, want line 2 column 4 naming U+00A0", fs)
	}
}

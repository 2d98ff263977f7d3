package shared

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckFilePath(t *testing.T) {
	for _, p := range []string{"a", "data.csv", "out/chart.png", ".hidden", "a..b", "é/ü.txt"} {
		if err := CheckFilePath("path", p, false); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "/etc/passwd", "..", "../x", "a/../../x", "a/./b", "./a", "a//b", "a/", "a\\..\\b", "a\x00b", "a\nb", "\xff", strings.Repeat("a", MaxFilePathBytes+1)} {
		err := CheckFilePath("path", p, false)
		var fe *FieldError
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &fe) || fe.Field != "path" {
			t.Errorf("%q: want a FieldError on path, got %v", p, err)
		}
	}
	if err := CheckFilePath("path", "", true); err != nil {
		t.Errorf("empty with allowEmpty: %v", err)
	}
}

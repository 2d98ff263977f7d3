package shared

import (
	"strings"
	"unicode/utf8"
)

// MaxFilePathBytes bounds a workspace path.
const MaxFilePathBytes = 1024

// CheckFilePath reports whether p is a path a FileStore accepts: relative,
// slash-separated, clean (no empty, "." or ".." element, no trailing
// slash), valid UTF-8 without control characters or backslashes, at most
// MaxFilePathBytes. An empty p is refused unless allowEmpty (ListFiles of
// the whole workspace). The error is a *FieldError on field, so it wraps
// ErrInvalidArgument. It says nothing about symbolic links: a backend
// resolves p without following any.
func CheckFilePath(field, p string, allowEmpty bool) error {
	bad := func(reason string) error {
		return &FieldError{Field: field, Reason: field + " " + reason}
	}
	if p == "" {
		if allowEmpty {
			return nil
		}
		return bad("is empty: name a file of the workspace, e.g. data.csv")
	}
	if len(p) > MaxFilePathBytes {
		return bad("is longer than 1024 bytes")
	}
	if !utf8.ValidString(p) {
		return bad("is not valid UTF-8")
	}
	if strings.HasPrefix(p, "/") {
		return bad("must be relative to the workspace, not absolute")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return bad("contains a control character or a backslash")
		}
	}
	for _, el := range strings.Split(p, "/") {
		switch el {
		case "":
			return bad("has an empty element (// or a trailing slash)")
		case ".", "..":
			return bad("must be clean: no \".\" or \"..\" element")
		}
	}
	return nil
}

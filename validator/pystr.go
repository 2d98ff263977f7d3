package validator

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/runenames"
)

type prefix struct {
	raw, bytes, f bool
}

// parsePrefix reads a string_start token; it reports false for a prefix or
// quote CPython does not accept (ub”, backticks, ...).
func parsePrefix(start string) (prefix, bool) {
	var p prefix
	letters := ""
	for i := 0; i < len(start); i++ {
		switch c := start[i]; c {
		case '"', '\'':
			switch strings.ToLower(letters) {
			case "", "r", "u", "b", "br", "rb", "f", "fr", "rf":
				return p, true
			}
			return p, false
		default:
			letters += string(c)
			switch c {
			case 'r', 'R':
				p.raw = true
			case 'b', 'B':
				p.bytes = true
			case 'f', 'F':
				p.f = true
			}
		}
	}
	return p, false
}

// decodePy decodes the escapes of a piece of a Python string literal the way
// CPython's tokenizer does. Bytes literals decode to one rune per byte
// (latin-1), which is what the in-child checker compares. It reports false
// for an escape CPython rejects (truncated \x, \u, \U, \N{...}).
func decodePy(s string, p prefix) (string, bool) {
	if p.f {
		// In f-strings "{{" and "}}" are literal braces (tree-sitter leaves
		// them in string_content in some positions).
		s = strings.ReplaceAll(strings.ReplaceAll(s, "{{", "{"), "}}", "}")
	}
	if p.bytes {
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return "", false // bytes can only contain ASCII literal characters
			}
		}
	}
	if p.raw || strings.IndexByte(s, '\\') < 0 {
		if p.bytes {
			return latin1(s), true
		}
		return s, true
	}
	var b strings.Builder
	ok := true
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			if p.bytes {
				b.WriteRune(rune(c))
				i++
			} else {
				r, size := utf8.DecodeRuneInString(s[i:])
				b.WriteRune(r)
				i += size
			}
			continue
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\':
			b.WriteByte('\\')
		case '\'':
			b.WriteByte('\'')
		case '"':
			b.WriteByte('"')
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
				v = v*8 + int(s[i]-'0')
				i++
			}
			if p.bytes {
				v &= 0xff
			}
			b.WriteRune(rune(v))
		case 'x':
			v, good := hexN(s, i, 2)
			if !good {
				return b.String(), false
			}
			i += 2
			b.WriteRune(rune(v))
		case 'u', 'U', 'N':
			if p.bytes {
				b.WriteByte('\\')
				b.WriteByte(e)
				continue
			}
			switch e {
			case 'u', 'U':
				n := 4
				if e == 'U' {
					n = 8
				}
				v, good := hexN(s, i, n)
				if !good || v > 0x10ffff {
					return b.String(), false
				}
				i += n
				b.WriteRune(rune(v))
			case 'N':
				if i >= len(s) || s[i] != '{' {
					return b.String(), false
				}
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return b.String(), false
				}
				name := s[i+1 : i+end]
				i += end + 1
				if name == "" {
					return b.String(), false
				}
				r := unicodeName(name)
				if r < 0 {
					return b.String(), false
				}
				b.WriteRune(r)
			}
		default:
			// Unknown escapes keep the backslash (a DeprecationWarning in
			// CPython, not an error).
			b.WriteByte('\\')
			if p.bytes {
				b.WriteRune(rune(e))
			} else {
				r, size := utf8.DecodeRuneInString(s[i-1:])
				b.WriteRune(r)
				i += size - 1
			}
		}
	}
	return b.String(), ok
}

func latin1(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			var b strings.Builder
			for j := 0; j < len(s); j++ {
				b.WriteRune(rune(s[j]))
			}
			return b.String()
		}
	}
	return s
}

func hexN(s string, i, n int) (int, bool) {
	if i+n > len(s) {
		return 0, false
	}
	v := 0
	for k := 0; k < n; k++ {
		c := s[i+k]
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v*16 + int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v*16 + int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

var digitNames = []string{"ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE"}

var (
	nameOnce  sync.Once
	nameTable map[string]rune
)

// unicodeName resolves a \N{...} name like CPython (case-insensitively); it
// returns -1 for a name it does not know, which CPython rejects too (CPython
// also knows name aliases: those are rejected here, the stricter side). The
// ASCII word characters, which are all the rules compare, are resolved
// without the table; the full table is built on first use.
func unicodeName(name string) rune {
	n := strings.ToUpper(name)
	switch n {
	case "LOW LINE":
		return '_'
	case "FULL STOP":
		return '.'
	}
	if rest, ok := strings.CutPrefix(n, "LATIN SMALL LETTER "); ok && len(rest) == 1 && rest[0] >= 'A' && rest[0] <= 'Z' {
		return rune(rest[0] - 'A' + 'a')
	}
	if rest, ok := strings.CutPrefix(n, "LATIN CAPITAL LETTER "); ok && len(rest) == 1 && rest[0] >= 'A' && rest[0] <= 'Z' {
		return rune(rest[0])
	}
	if rest, ok := strings.CutPrefix(n, "DIGIT "); ok {
		for i, d := range digitNames {
			if rest == d {
				return rune('0' + i)
			}
		}
	}
	nameOnce.Do(func() {
		nameTable = make(map[string]rune, 1<<15)
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			nm := runenames.Name(r)
			if nm == "" || nm[0] == '<' {
				continue
			}
			nameTable[nm] = r
		}
	})
	if r, ok := nameTable[n]; ok {
		return r
	}
	return -1
}

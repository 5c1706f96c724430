package inbox

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// jsonbSafe reports whether Postgres will take p as jsonb. encoding/json
// accepts more than jsonb does: invalid UTF-8, \u0000, unpaired surrogate
// escapes and numbers outside numeric's range all pass json.Valid but fail
// the cast, and with it the whole batch's statement. Such payloads are kept
// as raw bytes instead. It errs on the side of raw: a payload it refuses may
// still have been valid jsonb.
//
// It runs on every delivery, so after json.Valid it is one pass over the
// bytes with no allocation for ordinary payloads. validated skips json.Valid
// for a payload the provider adapter already decoded with json.Unmarshal
// (which validates the whole document first); the scan below relies on
// validity either way.
func jsonbSafe(p []byte, validated bool) bool {
	if (!validated && !json.Valid(p)) || !utf8.Valid(p) {
		return false
	}
	inString := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		if inString {
			switch c {
			case '"':
				inString = false
			case '\\':
				// Valid JSON: an escape is complete, and \u has four hex digits.
				i++
				if p[i] != 'u' {
					continue
				}
				r := hex4(p[i+1 : i+5])
				i += 4
				switch {
				case r == 0:
					return false
				case r >= 0xDC00 && r <= 0xDFFF:
					return false // low surrogate without a high one
				case r >= 0xD800 && r <= 0xDBFF:
					if i+2 >= len(p) || p[i+1] != '\\' || p[i+2] != 'u' {
						return false
					}
					if lo := hex4(p[i+3 : i+7]); lo < 0xDC00 || lo > 0xDFFF {
						return false
					}
					i += 6
				}
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(p) && isNumberByte(p[j]) {
				j++
			}
			if !numericSafe(p[i:j]) {
				return false
			}
			i = j - 1
		}
	}
	return true
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'
}

// numericSafe is true for numbers well inside numeric's range (131072 digits
// before the point, 16383 after): at most 1000 characters and an exponent of
// at most 1000 either way.
func numericSafe(n []byte) bool {
	if len(n) > 1000 {
		return false
	}
	i := bytes.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	e, err := strconv.Atoi(string(n[i+1:]))
	return err == nil && e >= -1000 && e <= 1000
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		}
	}
	return r
}

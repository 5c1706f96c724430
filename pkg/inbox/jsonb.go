package inbox

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsonbSafe reports whether Postgres will take p as jsonb. encoding/json
// accepts more than jsonb does: invalid UTF-8, \u0000, unpaired surrogate
// escapes and numbers outside numeric's range all pass json.Valid but fail
// the cast, and with it the whole batch's statement, so an authenticated
// event would be answered 503 on every redelivery. Such payloads are kept as
// raw bytes instead. It errs on the side of raw: a payload it refuses may
// still have been valid jsonb.
func jsonbSafe(p []byte) bool {
	if !json.Valid(p) || !utf8.Valid(p) {
		return false
	}
	// In valid JSON a backslash only occurs inside a string, starting an
	// escape, and \u is always followed by four hex digits.
	for i := 0; i < len(p); i++ {
		if p[i] != '\\' {
			continue
		}
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
	d := json.NewDecoder(bytes.NewReader(p))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
		if n, ok := tok.(json.Number); ok && !numericSafe(string(n)) {
			return false
		}
	}
}

// numericSafe is true for numbers well inside numeric's range (131072 digits
// before the point, 16383 after): at most 1000 characters and an exponent of
// at most 1000 either way.
func numericSafe(n string) bool {
	if len(n) > 1000 {
		return false
	}
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	e, err := strconv.Atoi(n[i+1:])
	return err == nil && e >= -1000 && e <= 1000
}

func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b), 16, 32)
	return rune(n)
}

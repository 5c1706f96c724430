package provider

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrDuplicateKey: one object of the body has two keys that a reader may
// take for the same key. It is always wrapped together with ErrMalformed.
var ErrDuplicateKey = errors.New("duplicate key")

// maxKeyDepth is encoding/json's own nesting limit; a deeper body is
// refused by the adapters' decoding before this check runs.
const maxKeyDepth = 10000

// manyKeys is the object size above which keys are compared through a map
// instead of pairwise.
const manyKeys = 32

// CheckUniqueKeys refuses, wrapping ErrMalformed and ErrDuplicateKey, a
// JSON body in which any object, at any depth, has two keys that are equal
// after JSON unescaping and Unicode case folding.
//
// Two readers see such a body differently: encoding/json matches keys
// case-insensitively and keeps the last match, Postgres jsonb keeps the
// last of exact duplicates only and is case-sensitive, and other readers
// keep the first. The receiver checks a version with one reading and the
// processor would apply another, so a body one reading could pin a
// projection with must never be accepted. Every adapter calls this on the
// JSON document it stores, once the delivery is authenticated.
//
// It is one pass over the bytes; keys without escapes are compared in
// place, so an ordinary payload costs no allocation per key. Syntax errors
// are reported as ErrMalformed too, though the adapters' own decoding
// normally finds them first.
func CheckUniqueKeys(body []byte) error {
	var stack [64][]byte
	s := keyScanner{b: body, keys: stack[:0]}
	s.space()
	if err := s.value(0); err != nil {
		return err
	}
	s.space()
	if s.i != len(s.b) {
		return s.syntax("trailing data")
	}
	return nil
}

type keyScanner struct {
	b []byte
	i int
	// keys is reused by every object: an object's keys sit above its
	// parent's while it is scanned.
	keys [][]byte
}

func (s *keyScanner) syntax(what string) error {
	return fmt.Errorf("%w: JSON syntax at byte %d: %s", ErrMalformed, s.i, what)
}

func (s *keyScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *keyScanner) value(depth int) error {
	if depth > maxKeyDepth {
		return s.syntax("nested too deeply")
	}
	if s.i >= len(s.b) {
		return s.syntax("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		s.i++
		s.space()
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return nil
		}
		for {
			s.space()
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.space()
			if s.i >= len(s.b) {
				return s.syntax("unterminated array")
			}
			if s.b[s.i] == ']' {
				s.i++
				return nil
			}
			if s.b[s.i] != ',' {
				return s.syntax("expected , or ]")
			}
			s.i++
		}
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
		start := s.i
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', ']', '}', ' ', '\t', '\r', '\n':
				return s.scalar(start)
			}
			s.i++
		}
		return s.scalar(start)
	}
	return s.syntax("unexpected character")
}

// scalar checks a number or literal cheaply: the adapters' decoding has
// validated it already; this only keeps garbage from passing silently.
func (s *keyScanner) scalar(start int) error {
	switch v := s.b[start:s.i]; string(v) {
	case "true", "false", "null":
		return nil
	default:
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return s.syntax("bad literal")
		}
		return nil
	}
}

func (s *keyScanner) object(depth int) error {
	base := len(s.keys)
	var seen map[string]struct{}
	err := s.members(depth, func(key, _ []byte) (bool, error) {
		return true, s.unique(key, base, &seen)
	})
	s.keys = s.keys[:base]
	return err
}

// members scans the object at s.i and calls fn with each key (unescaped)
// and its value's bytes, scanned at depth+1, until fn returns false or an
// error.
func (s *keyScanner) members(depth int, fn func(key, value []byte) (bool, error)) error {
	s.i++ // {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.syntax("expected a key")
		}
		key, escaped, err := s.str()
		if err != nil {
			return err
		}
		if escaped {
			key = unescape(key)
		}
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.syntax("expected :")
		}
		s.i++
		s.space()
		start := s.i
		if err := s.value(depth + 1); err != nil {
			return err
		}
		if more, err := fn(key, s.b[start:s.i]); err != nil || !more {
			return err
		}
		s.space()
		if s.i >= len(s.b) {
			return s.syntax("unterminated object")
		}
		if s.b[s.i] == '}' {
			s.i++
			return nil
		}
		if s.b[s.i] != ',' {
			return s.syntax("expected , or }")
		}
		s.i++
	}
}

// unique records key among the object's keys (those above base), refusing
// one equal to an earlier key under Unicode case folding, the folding
// encoding/json matches field names with.
func (s *keyScanner) unique(key []byte, base int, seen *map[string]struct{}) error {
	if *seen != nil {
		f := fold(key)
		if _, ok := (*seen)[f]; ok {
			return duplicate(key)
		}
		(*seen)[f] = struct{}{}
		return nil
	}
	for _, k := range s.keys[base:] {
		if len(k) == len(key) || !isASCII(k) || !isASCII(key) {
			if bytes.EqualFold(k, key) {
				return duplicate(key)
			}
		}
	}
	s.keys = append(s.keys, key)
	if len(s.keys)-base > manyKeys {
		*seen = make(map[string]struct{}, 2*manyKeys)
		for _, k := range s.keys[base:] {
			(*seen)[fold(k)] = struct{}{}
		}
	}
	return nil
}

func duplicate(key []byte) error {
	return fmt.Errorf("%w: %w %q", ErrMalformed, ErrDuplicateKey, key)
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// fold maps key to one spelling per case-folding class: every rune to the
// smallest rune of its unicode.SimpleFold orbit, the classes bytes.EqualFold
// compares by.
func fold(key []byte) string {
	out := make([]byte, 0, len(key))
	for len(key) > 0 {
		r, n := utf8.DecodeRune(key)
		key = key[n:]
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		out = utf8.AppendRune(out, least)
	}
	return string(out)
}

// str scans a string at s.i and returns its raw contents (between the
// quotes) and whether it holds escapes.
func (s *keyScanner) str() ([]byte, bool, error) {
	s.i++ // "
	start, escaped := s.i, false
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			raw := s.b[start:s.i]
			s.i++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			s.i += 2
		case c < 0x20:
			return nil, false, s.syntax("control character in string")
		default:
			s.i++
		}
	}
	return nil, false, s.syntax("unterminated string")
}

// unescape decodes a string's escapes as encoding/json does: invalid
// surrogates become U+FFFD.
func unescape(raw []byte) []byte {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			out = append(out, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := hexRune(raw[i+1:])
			i += n
			if utf16.IsSurrogate(r) {
				if i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					r2, n2 := hexRune(raw[i+3:])
					if d := utf16.DecodeRune(r, r2); d != unicode.ReplacementChar {
						r, i = d, i+2+n2
					} else {
						r = unicode.ReplacementChar
					}
				} else {
					r = unicode.ReplacementChar
				}
			}
			out = utf8.AppendRune(out, r)
		default: // " \ /
			out = append(out, raw[i])
		}
	}
	return out
}

// hexRune reads the four hex digits of a \u escape; it returns how many
// bytes it consumed.
func hexRune(b []byte) (rune, int) {
	if len(b) < 4 {
		return unicode.ReplacementChar, len(b)
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return unicode.ReplacementChar, 4
	}
	return rune(n), 4
}

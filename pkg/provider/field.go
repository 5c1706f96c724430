package provider

// EachField calls fn with each key of the JSON object doc (unescaped) and
// its value's bytes as written, in the document's order, until fn returns
// false. It reads doc in one pass and allocates nothing for a key without
// escapes, where decoding the object into a map copies every key and
// value. A doc that is not one JSON object is an error (wrapping
// ErrMalformed).
func EachField(doc []byte, fn func(key, value []byte) bool) error {
	var stack [16][]byte
	s := keyScanner{b: doc, keys: stack[:0]}
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return s.syntax("expected an object")
	}
	stopped := false
	if err := s.members(0, func(key, value []byte) (bool, error) {
		stopped = !fn(key, value)
		return !stopped, nil
	}); err != nil || stopped {
		return err
	}
	return s.end()
}

// end refuses anything but white space after the document.
func (s *keyScanner) end() error {
	s.space()
	if s.i != len(s.b) {
		return s.syntax("trailing data")
	}
	return nil
}

// Field is the value of key in the JSON object doc, as written; ok is false
// when doc is not an object or has no such key. The first of repeated keys
// is the one found: intake refuses bodies with repeated keys
// (CheckUniqueKeys).
func Field(doc []byte, key string) (value []byte, ok bool) {
	_ = EachField(doc, func(k, v []byte) bool {
		if string(k) == key {
			value, ok = v, true
			return false
		}
		return true
	})
	return value, ok
}

package probe

// Byte-level helpers for the dialects' fast path. A content chunk is scanned,
// not decoded: find a key, skip to its value, walk the JSON string. Chunks
// that look unusual go to encoding/json instead, which also validates them.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// errMalformed marks a chunk that does not parse.
var errMalformed = errors.New("malformed chunk")

// errNotObject is the fast path's framing failure.
var errNotObject = errors.New("not a JSON object")

// malformed wraps a parse failure of one chunk with a short excerpt of it.
func malformed(dialect string, data []byte, err error) error {
	return fmt.Errorf("%w: %s: %v (chunk %q)", errMalformed, dialect, err, excerpt(data, 80))
}

// excerpt returns at most n bytes of b as a string, marking a cut.
func excerpt(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// nextKey finds the next object key in data at or after from: it returns
// the key (without quotes), the index of its value's first byte, and where
// to continue; next < 0 when there is none. It hops from colon to colon
// with IndexByte and accepts a colon only after an unescaped quote, which
// inside valid JSON can only close a key (a quote inside a string value is
// always escaped). Keys with escapes are returned raw; none of ours has one.
func nextKey(data []byte, from int) (key []byte, value, next int) {
	for from < len(data) {
		j := bytes.IndexByte(data[from:], ':')
		if j < 0 {
			return nil, 0, -1
		}
		colon := from + j
		from = colon + 1
		q := colon - 1
		for q >= 0 && isSpace(data[q]) {
			q--
		}
		if q <= 0 || data[q] != '"' || data[q-1] == '\\' {
			continue
		}
		open := bytes.LastIndexByte(data[:q], '"')
		if open < 0 {
			continue
		}
		v := from
		for v < len(data) && isSpace(data[v]) {
			v++
		}
		if v == len(data) {
			return nil, 0, -1
		}
		return data[open+1 : q], v, from
	}
	return nil, 0, -1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// jsonObject reports whether data looks like one JSON object: the cheap
// framing check of the fast path (truncation and garbage fail it).
func jsonObject(data []byte) bool {
	return len(data) >= 2 && data[0] == '{' && data[len(data)-1] == '}'
}

// stringValue is what scanString found.
type stringValue struct {
	end          int    // index after the closing quote
	nonEmpty     bool   // at least one character
	replacements int    // U+FFFD (raw or \ufffd) and invalid UTF-8 bytes
	quoted       []byte // the string as it stands in the JSON, quotes included (a view of the data)
}

// scanString walks the JSON string whose opening quote is at data[i]. It
// validates escapes and control characters and counts replacement
// characters, without decoding. ok is false for anything ill-formed.
func scanString(data []byte, i int) (v stringValue, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return v, false
	}
	i++
	start := i
	high := false
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			if high {
				v.replacements += countReplacements(data[start:i])
			}
			v.end = i + 1
			v.nonEmpty = i > start
			v.quoted = data[start-1 : i+1]
			return v, true
		case c == '\\':
			n, ok := scanEscape(data, i, &v)
			if !ok {
				return v, false
			}
			i = n
		case c < 0x20:
			return v, false
		case c >= utf8.RuneSelf:
			high = true
			i++
		default:
			i++
		}
	}
	return v, false
}

// scanEscape checks the escape whose backslash is at data[i] and returns
// the index after it, counting a \ufffd or a lone surrogate (which the
// decoder turns into U+FFFD) in v. ok is false for a malformed escape.
// Escapes are rare in streamed text: the plain bytes stay in scanString's
// loop.
func scanEscape(data []byte, i int, v *stringValue) (next int, ok bool) {
	if i+1 >= len(data) {
		return i, false
	}
	switch data[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, true
	case 'u':
		r, ok := unicodeEscape(data, i)
		if !ok {
			return i, false
		}
		i += 6
		switch {
		case r == utf8.RuneError:
			v.replacements++
		case r >= 0xD800 && r < 0xDC00:
			// A high surrogate needs a low one next, else the decoder
			// makes it U+FFFD.
			if lo, ok := unicodeEscape(data, i); ok && lo >= 0xDC00 && lo < 0xE000 {
				return i + 6, true
			}
			v.replacements++
		case r >= 0xDC00 && r < 0xE000:
			v.replacements++
		}
		return i, true
	}
	return i, false
}

// unicodeEscape reads the \uXXXX escape at data[i]; ok is false when there
// is none.
func unicodeEscape(data []byte, i int) (r rune, ok bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	return hex4(data[i+2 : i+6])
}

// countReplacements counts U+FFFD runes and invalid UTF-8 bytes in b (what
// encoding/json would turn into U+FFFD).
func countReplacements(b []byte) int {
	n := 0
	for len(b) > 0 {
		if b[0] < utf8.RuneSelf {
			b = b[1:]
			continue
		}
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError {
			n++ // size 1: an invalid byte; size 3: a literal U+FFFD
		}
		b = b[size:]
	}
	return n
}

// countRunesFFFD counts U+FFFD in a decoded string (the slow path: the
// decoder has already replaced invalid bytes).
func countRunesFFFD(s string) int {
	n := 0
	for _, r := range s {
		if r == utf8.RuneError {
			n++
		}
	}
	return n
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// isNull reports whether data at i starts the literal null.
func isNull(data []byte, i int) bool {
	return i >= 0 && bytes.HasPrefix(data[i:], []byte("null"))
}

// fieldState says what scanAt found.
type fieldState int

const (
	fieldAbsent fieldState = iota // no such key
	fieldNull                     // the value is null
	fieldString                   // a well-formed string
	fieldOther                    // anything else: let encoding/json judge
)

// scanAt reads the value starting at data[i] (i < 0: absent) as a JSON
// string.
func scanAt(data []byte, i int) (stringValue, fieldState) {
	if i < 0 {
		return stringValue{}, fieldAbsent
	}
	if isNull(data, i) {
		return stringValue{}, fieldNull
	}
	v, ok := scanString(data, i)
	if !ok {
		return v, fieldOther
	}
	return v, fieldString
}

// stringOrNull reports whether a value starting with c may be a string or null.
func stringOrNull(c byte) bool { return c == '"' || c == 'n' }

// countArray counts the elements of a JSON array of scalars (llama.cpp's
// "tokens":[1,2,3]) starting at data[i] == '['. ok is false if it is not one.
func countArray(data []byte, i int) (n int, ok bool) {
	if i < 0 || i >= len(data) || data[i] != '[' {
		return 0, false
	}
	end := bytes.IndexByte(data[i:], ']')
	if end < 0 {
		return 0, false
	}
	body := bytes.TrimSpace(data[i+1 : i+end])
	if len(body) == 0 {
		return 0, true
	}
	return bytes.Count(body, []byte(",")) + 1, true
}

// errorMessage extracts a readable message from an error value: a JSON
// string, or an object with "message" (OpenAI, llama.cpp, vLLM).
func errorMessage(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	return excerpt(raw, 200)
}

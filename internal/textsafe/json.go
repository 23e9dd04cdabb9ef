package textsafe

import "unicode/utf8"

// JSON returns the JSON text b with the characters a terminal acts on
// written as \u escapes, so that `latscope ... --json` or a JSON report
// shown in a terminal is safe, while a program that decodes it gets exactly
// the same values.
//
// encoding/json already escapes the C0 controls inside strings, but writes
// DEL, the C1 controls and the bidirectional overrides raw. In valid JSON
// a character other than ASCII punctuation, letters, digits and whitespace
// can only occur inside a string, where \uXXXX means the same character;
// so the rewrite changes no decoded value. A byte that is not valid UTF-8
// becomes \ufffd, which is what a decoder (encoding/json's included) reads
// it as. Tab, newline, CR and space are kept: outside strings they are
// JSON's whitespace. A text that needs no change is returned as it is,
// without allocating.
func JSON(b []byte) []byte {
	i := firstJSONUnsafe(b)
	if i < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		if !jsonUnsafe(r, size) {
			out = append(out, b[i:i+size]...)
		} else { // an invalid byte decodes as utf8.RuneError: \ufffd
			out = append(out, '\\', 'u',
				hexDigits[r>>12&0xf], hexDigits[r>>8&0xf], hexDigits[r>>4&0xf], hexDigits[r&0xf])
		}
		i += size
	}
	return out
}

func firstJSONUnsafe(b []byte) int {
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			if jsonUnsafe(rune(c), 1) {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if jsonUnsafe(r, size) {
			return i
		}
		i += size
	}
	return -1
}

// jsonUnsafe is unsafeRune for JSON text: JSON's whitespace is kept, and
// so are U+2028 and U+2029 (encoding/json escapes them in any case).
func jsonUnsafe(r rune, size int) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	return unsafeRune(r, size, multiLine)
}

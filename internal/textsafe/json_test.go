package textsafe_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/internal/textsafe/hostile"
)

func TestJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`{"a":"b"}` + "\n", `{"a":"b"}` + "\n"},
		{"{\n\t\"a\": \"\u009b\x7f\"\r\n}", "{\n\t\"a\": \"\\u009b\\u007f\"\r\n}"},
		{"[\"\u202e\"]", `["\u202e"]`},
		{"[\"\xff\"]", `["\ufffd"]`},
		{"[\"\u2028\"]", "[\"\u2028\"]"}, // no terminal acts on it; encoding/json escapes it anyway
	} {
		if got := string(textsafe.JSON([]byte(tc.in))); got != tc.want {
			t.Errorf("JSON(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestJSONKeepsValues: every hostile string, encoded by encoding/json and
// made safe, decodes to what encoding/json decodes from the original.
func TestJSONKeepsValues(t *testing.T) {
	t.Parallel()
	var texts []string
	for _, c := range hostile.All() {
		texts = append(texts, c.Text)
	}
	enc, err := json.MarshalIndent(map[string]any{"texts": texts, "n": -1.5}, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	checkJSON(t, enc)
}

func checkJSON(t *testing.T, in []byte) {
	t.Helper()
	out := textsafe.JSON(in)
	// CR is kept: outside a string it is JSON's whitespace (and inside one
	// it is not valid JSON).
	assertSafe(t, strings.ReplaceAll(string(out), "\r", ""), false)
	if again := textsafe.JSON(out); !bytes.Equal(again, out) {
		t.Fatalf("not idempotent: %q -> %q -> %q", in, out, again)
	}
	var want, got any
	if json.Unmarshal(in, &want) != nil {
		return // not JSON: nothing to compare
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("JSON(%q) = %q does not decode: %v", in, out, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("JSON(%q) = %q decodes to %#v, want %#v", in, out, got, want)
	}
}

func FuzzJSON(f *testing.F) {
	for _, c := range hostile.All() {
		b, _ := json.Marshal(c.Text)
		f.Add(b)
		f.Add([]byte(c.Text))
	}
	f.Add([]byte("[\"\xc2\x9b\", 1e5, {\"\x7f\": null}]"))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkJSON(t, b)
	})
}

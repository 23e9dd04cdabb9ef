package event

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/latscope/latscope/internal/textsafe"
	"github.com/latscope/latscope/internal/textsafe/hostile"
)

// Every string of every kind of event, however deep (a GPU's pod, a
// server sample's stage names, a marker's request ids), comes out of Safe
// escaped, and the event it was given is left as it was.
func TestSafeEscapesEveryString(t *testing.T) {
	t.Parallel()
	bad := hostile.Joined()
	for _, ev := range sampleEvents() {
		poisoned := poison(t, ev, bad)
		before, _ := json.Marshal(poisoned)
		got := Safe(poisoned)
		after, _ := json.Marshal(poisoned)
		if string(before) != string(after) {
			t.Errorf("%s: Safe changed the event it was given", ev.Kind)
		}
		walkStrings(reflect.ValueOf(got), func(s string) {
			if i := textsafe.IndexUnsafeLine(s); i >= 0 {
				t.Errorf("%s: %q left unescaped at %d", ev.Kind, s, i)
			}
		})
		if leaks := hostile.Leaks(string(mustJSON(t, got)), hostile.Terminal); len(leaks) > 0 {
			t.Errorf("%s: %v leak", ev.Kind, leaks)
		}
	}
}

// An event with nothing to escape comes back as it was: the same payload.
func TestSafeKeepsCleanEvents(t *testing.T) {
	t.Parallel()
	for _, ev := range sampleEvents() {
		if got := Safe(ev); got != ev {
			t.Errorf("%s: clean event changed", ev.Kind)
		}
	}
}

// A hostile line of a recording or an agent's feed decodes escaped.
func TestUnmarshalEscapes(t *testing.T) {
	t.Parallel()
	ev := sampleEvents()[0]
	ev.Request.Error = hostile.Joined()
	ev.Request.Model = "\x1b]0;HACKED\x07"
	line, err := Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(line)
	if err != nil {
		t.Fatal(err)
	}
	if got.Request.Model != `\x1b]0;HACKED\x07` || textsafe.IndexUnsafeLine(got.Request.Error) >= 0 {
		t.Errorf("decoded model %q, error %q: want them escaped", got.Request.Model, got.Request.Error)
	}
}

func FuzzSafe(f *testing.F) {
	for _, c := range hostile.All() {
		f.Add(c.Text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, ev := range sampleEvents() {
			walkStrings(reflect.ValueOf(Safe(poison(t, ev, s))), func(s string) {
				if textsafe.IndexUnsafeLine(s) >= 0 {
					t.Fatalf("%q left unescaped", s)
				}
			})
		}
	})
}

// poison returns a deep copy of ev (through its JSON) with every string
// field set to bad and a key of bad added to every string-keyed map.
func poison(t testing.TB, ev Event, bad string) Event {
	t.Helper()
	var cp Event
	if err := json.Unmarshal(mustJSON(t, ev), &cp); err != nil {
		t.Fatal(err)
	}
	setStrings(reflect.ValueOf(&cp).Elem(), bad)
	return cp
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func setStrings(v reflect.Value, bad string) {
	switch v.Kind() {
	case reflect.String:
		if v.Type() == reflect.TypeFor[Kind]() {
			return // the envelope's own kind, not outside text
		}
		v.SetString(bad)
	case reflect.Pointer:
		if !v.IsNil() {
			setStrings(v.Elem(), bad)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setStrings(v.Field(i), bad)
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Len() == 0 && v.Type().Elem().Kind() == reflect.String {
			v.Set(reflect.Append(v, reflect.ValueOf(bad).Convert(v.Type().Elem())))
		}
		for i := range v.Len() {
			setStrings(v.Index(i), bad)
		}
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String {
			if v.IsNil() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			v.SetMapIndex(reflect.ValueOf(bad).Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		}
	}
}

func walkStrings(v reflect.Value, f func(string)) {
	switch v.Kind() {
	case reflect.String:
		f(v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkStrings(v.Field(i), f)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkStrings(v.Index(i), f)
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			walkStrings(it.Key(), f)
			walkStrings(it.Value(), f)
		}
	}
}

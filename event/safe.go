package event

import (
	"reflect"

	"github.com/latscope/latscope/internal/textsafe"
)

// Safe returns e with every string in it (a server's error body, a model,
// an agent's session name, a GPU's name, a marker's message, map keys
// included) made safe to show by textsafe.Line: no control character,
// C1 control, bidirectional override or invalid UTF-8 reaches a terminal,
// a report or a spreadsheet from an event.
//
// Events enter latscope in two places, a source's emit (pipeline.Run) and a
// decoded line of a recording or an agent's feed (Unmarshal); both call
// Safe, so no consumer has to. Safe copies what it changes and leaves e
// itself as it was: a source may still hold the request it emitted. An
// event with nothing to escape, all of them but a hostile party's, is
// returned as it is (a request's check takes about a microsecond).
//
// Safe walks the payload by reflection, so a string field added later is
// covered without a change here.
func Safe(e Event) Event {
	e.Request = safePayload(e.Request)
	e.Server = safePayload(e.Server)
	e.GPU = safePayload(e.GPU)
	e.Marker = safePayload(e.Marker)
	e.Session = safePayload(e.Session)
	e.Probe = safePayload(e.Probe)
	e.Span = safePayload(e.Span)
	e.Loss = safePayload(e.Loss)
	e.Host = safePayload(e.Host)
	return e
}

// safePayload returns p, or an escaped copy of it if it needs one.
func safePayload[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := reflect.ValueOf(p)
	if !needsEscape(v) {
		return p
	}
	return escapeValue(v).Interface().(*T)
}

// needsEscape reports whether v holds a string Line would change.
func needsEscape(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return textsafe.IndexUnsafeLine(v.String()) >= 0
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && needsEscape(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			// CanInterface: an exported field (Type.Field allocates)
			if f := v.Field(i); f.CanInterface() && needsEscape(f) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if !holdsStrings(v.Type().Elem(), 0) {
			return false // a request's chunks: numbers only
		}
		for i := range v.Len() {
			if needsEscape(v.Index(i)) {
				return true
			}
		}
	case reflect.Map:
		keys, elems := holdsStrings(v.Type().Key(), 0), holdsStrings(v.Type().Elem(), 0)
		if !keys && !elems {
			return false
		}
		var it reflect.MapIter // not MapRange: that allocates
		for it.Reset(v); it.Next(); {
			if keys && needsEscape(it.Key()) || elems && needsEscape(it.Value()) {
				return true
			}
		}
	}
	return false
}

// holdsStrings reports whether a value of type t can hold a string an
// exported field reaches. depth stops a type that refers to itself.
func holdsStrings(t reflect.Type, depth int) bool {
	if depth > 8 {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsStrings(t.Elem(), depth+1)
	case reflect.Map:
		return holdsStrings(t.Key(), depth+1) || holdsStrings(t.Elem(), depth+1)
	case reflect.Struct:
		// A zero value's fields, not Type.Field, which allocates.
		z := reflect.Zero(t)
		for i := range z.NumField() {
			if f := z.Field(i); f.CanInterface() && holdsStrings(f.Type(), depth+1) {
				return true
			}
		}
	}
	return false
}

// escapeValue returns a copy of v with its strings escaped; what holds
// nothing to escape is shared with v, not copied.
func escapeValue(v reflect.Value) reflect.Value {
	if !needsEscape(v) {
		return v
	}
	switch v.Kind() {
	case reflect.String:
		out := reflect.New(v.Type()).Elem()
		out.SetString(textsafe.Line(v.String()))
		return out
	case reflect.Pointer:
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(escapeValue(v.Elem()))
		return out
	case reflect.Interface:
		out := reflect.New(v.Type()).Elem()
		out.Set(escapeValue(v.Elem()))
		return out
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v) // unexported fields too
		for i := range v.NumField() {
			if f := v.Field(i); f.CanInterface() {
				out.Field(i).Set(escapeValue(f))
			}
		}
		return out
	case reflect.Slice:
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(escapeValue(v.Index(i)))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(escapeValue(v.Index(i)))
		}
		return out
	case reflect.Map:
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(escapeValue(it.Key()), escapeValue(it.Value()))
		}
		return out
	}
	return v
}

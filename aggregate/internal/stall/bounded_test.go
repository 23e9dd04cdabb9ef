package stall

import "testing"

// A bounded list keeps its newest values and never more than its limit.
func TestAppendBoundedKeepsTheNewest(t *testing.T) {
	var list []int
	for v := range 100 {
		list = appendBounded(list, v, 16)
		if len(list) > 16 || list[len(list)-1] != v {
			t.Fatalf("after %d: %v", v, list)
		}
	}
	if len(list) < 14 {
		t.Errorf("a full list dropped more than its oldest eighth: %v", list)
	}
}

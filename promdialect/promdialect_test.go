package promdialect

import (
	"strings"
	"testing"
)

func TestByName(t *testing.T) {
	t.Parallel()
	for _, name := range Names() {
		d, err := ByName(name)
		if err != nil || d.Name != name {
			t.Errorf("%s: %q %v", name, d.Name, err)
		}
	}
	if _, err := ByName("ollama"); err == nil || !strings.Contains(err.Error(), "vllm") {
		t.Errorf("unknown name: err = %v", err)
	}
}

package meshapi

import (
	"strings"
	"testing"
)

// A measured value reads as the provider answered it, and a large one is cut:
// it lands in a plan's reason and on one line of plan watch.
func TestMeasurementValueWords(t *testing.T) {
	doc := []any{map[string]any{"module": "host", "restarts": float64(1), "state": "running"}}
	long := map[string]any{"containers": strings.Repeat("x", 300)}
	for _, tc := range []struct {
		name  string
		value any
		want  string
	}{
		{"nothing read", nil, "-"},
		{"a number", 0.012345, "0.01235"},
		{"a vector", []any{0.5, float64(2)}, "[0.5,2]"},
		{"a JSON document, as JSON", doc, `[{"module":"host","restarts":1,"state":"running"}]`},
		{"a string", "ok", `"ok"`},
		{"a large document, cut", long, `{"containers":"` + strings.Repeat("x", 120-len(`{"containers":"`)) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Measurement{Value: tc.value}).ValueWords(); got != tc.want {
				t.Errorf("ValueWords() = %q, want %q", got, tc.want)
			}
		})
	}
}

package devlaunch

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The output kept is bounded, starts at a line where it can, and says how
// much went before it.
func TestTailBuffer(t *testing.T) {
	b := NewTailBuffer(10)
	_, _ = b.Write([]byte("one\n"))
	assert.Equal(t, "one\n", b.String(), "under the bound: all of it, nothing said dropped")
	for _, line := range []string{"two\n", "three\n", "four\n"} {
		_, _ = b.Write([]byte(line))
	}
	assert.Equal(t, "[... 14 earlier bytes dropped ...]\nfour\n", b.String())
	_, _ = b.Write([]byte(strings.Repeat("y", 25)))
	assert.Equal(t, "[... 34 earlier bytes dropped ...]\n"+strings.Repeat("y", 10), b.String(), "no line start to keep: the last bytes")
}

package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// decodeAny gives what yaml's own decode into an any gives, whatever the
// document holds.
func TestDecodeAnyIsYamlsDecode(t *testing.T) {
	for _, doc := range []string{
		"a: 1\nb: [x, 2, {c: true}]\nd: {e: null, f: 1.5, g: '07'}\n",
		"machines:\n  edge-1: {host: http://h:1, tier: 1, labels: {ring: canary}}\n  edge-2: {host: http://h:2}\n",
		"base: &b {x: 1, y: 2}\nuse: {<<: *b, y: 3}\n",
		"ints: {1: one, 2: two}\n",
		"mixed: {a: 1, 2: b}\n",
		"alias: &a [1, 2]\nagain: *a\n",
		"when: 2026-12-05T12:00:00Z\nempty:\n",
		"quoted: {\"123\": x, 'true': y}\n",
	} {
		t.Run(strings.Fields(doc)[0], func(t *testing.T) {
			var n yaml.Node
			require.NoError(t, yaml.Unmarshal([]byte(doc), &n))
			root := n.Content[0]
			var want any
			require.NoError(t, root.Decode(&want))
			got, err := decodeAny(root)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// BenchmarkLoadTenThousandMachines is what every starter command and each
// worker start pays to read a mesh.yaml of 10,000 machines.
func BenchmarkLoadTenThousandMachines(b *testing.B) {
	var y strings.Builder
	y.WriteString("temporal: {address: 127.0.0.1:7233, namespace: default, task_queue: tq}\nmodules:\n  app: {repo: ., path: app}\nmachines:\n")
	for i := range 10000 {
		fmt.Fprintf(&y, "  m-%05d: {host: http://127.0.0.1:%d, tier: %d, modules: [app]}\n", i, 20000+i, i%3+1)
	}
	data := []byte(y.String())
	for b.Loop() {
		if _, err := parse("mesh.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

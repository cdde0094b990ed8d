package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// labelledConfig is a mesh config with Temporal unreachable whose edges
// are placed by label: edge-1 a canary, edge-2 not.
func labelledConfig(t *testing.T, hostURL string) string {
	t.Helper()
	return unreachableMesh(t, fmt.Sprintf(`  control-node: {host: %[1]q, tier: 3, modules: [mesh-controller, host]}
  edge-1:       {host: %[1]q, labels: {ring: canary, site: fra1}, modules: [host]}
  edge-2:       {host: %[1]q, labels: {ring: main, site: ams2}, modules: [host]}
tiers:
  1: {select: "ring=canary"}
  2: {select: "site"}
`, hostURL))
}

// status --selector keeps the machines whose labels match, shows the
// labels, and refuses a selector that does not parse or matches nothing
// before Temporal is dialled or a host asked.
func TestStatusSelector(t *testing.T) {
	url := fakeHost(t, mesh.Report{Machine: "any"}, host.JournalPage{})
	cfg := labelledConfig(t, url)

	for _, tc := range []struct{ sel, want string }{
		{"ring in canary", `--selector: selector "ring in canary": at position 9: want ( after in`},
		{"ring=gold", `--selector "ring=gold" matches no machine of ` + cfg + ` (labels: ring=canary, ring=main, site=ams2, site=fra1)`},
	} {
		for _, cmd := range [][]string{{"status"}, {"plan", "list"}} {
			r := run(t, append(append([]string{"--config", cfg}, cmd...), "--selector", tc.sel)...)
			require.Error(t, r.err, cmd)
			assert.Equal(t, tc.want, r.err.Error(), cmd)
			assert.Equal(t, ExitUsage, ExitCode(r.err), cmd)
		}
	}

	r := run(t, "--config", cfg, "status", "--selector", "ring=canary", "-o", "json")
	require.Error(t, r.err, "Temporal is unreachable")
	var st statusJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	require.Len(t, st.Machines, 1, r.stdout)
	assert.Equal(t, "edge-1", st.Machines[0].Machine)
	assert.Equal(t, 1, st.Machines[0].Tier, "placed by its label")
	assert.Equal(t, map[string]string{"ring": "canary", "site": "fra1"}, st.Machines[0].Labels)

	r = run(t, "--config", cfg, "status", "--selector", "site in (fra1, ams2)")
	require.Error(t, r.err)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.GreaterOrEqual(t, len(lines), 3, r.stdout)
	assert.Regexp(t, `^MACHINE\s+TIER\s+LABELS\s+MODULE\s+GEN`, lines[0])
	assert.Regexp(t, `^edge-1\s+1\s+ring=canary,site=fra1\s+host\s`, lines[1])
	assert.Regexp(t, `^edge-2\s+2\s+ring=main,site=ams2\s+host\s`, lines[2])
	for _, l := range lines {
		assert.NotRegexp(t, `^control-node\s`, l, "not selected")
	}
}

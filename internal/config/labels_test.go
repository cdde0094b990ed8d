package config

import (
	"strings"
	"testing"

	"github.com/meshroll/meshroll/internal/selector"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// labelledMesh has two canaries picked by label, a machine named into a
// tier by number, and the control node last.
const labelledMesh = `modules:
  mesh-controller: {repo: ., control_plane: true}
  host: {repo: .}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 3, modules: [mesh-controller, host]}
  edge-1: {host: http://127.0.0.1:7401, labels: {ring: canary, site: fra1}, modules: [host]}
  edge-2: {host: http://127.0.0.1:7402, labels: {ring: main, site: ams2}, modules: [host]}
  edge-3: {host: http://127.0.0.1:7403, labels: {ring: canary, site: ams2}, modules: [host]}
  edge-4: {host: http://127.0.0.1:7404, tier: 2, labels: {ring: canary}, modules: [host]}
tiers:
  1: {select: "ring=canary", max_parallel: 1}
  2: {select: "site in (fra1, ams2)"}
`

func TestTiersSelectedByLabel(t *testing.T) {
	c, err := Parse("mesh.yaml", []byte(labelledMesh))
	require.NoError(t, err)
	tiers := map[string]int{}
	for name, m := range c.Machines {
		tiers[name] = m.Tier
	}
	assert.Equal(t, map[string]int{"control-node": 3, "edge-1": 1, "edge-2": 2, "edge-3": 1, "edge-4": 2}, tiers,
		"a machine without a tier is on the lowest-numbered tier that selects it; a tier the file gives wins")
	assert.True(t, c.Machines["edge-1"].TierBySelector)
	assert.False(t, c.Machines["edge-4"].TierBySelector)
	assert.Equal(t, map[string]string{"ring": "canary", "site": "fra1"}, c.Machines["edge-1"].Labels)

	targets, err := c.Targets("host")
	require.NoError(t, err)
	var order []string
	for _, tg := range targets {
		order = append(order, tg.Machine)
	}
	assert.Equal(t, []string{"edge-1", "edge-3", "edge-2", "edge-4", "control-node"}, order, "Targets read the resolved tiers")

	assert.Equal(t, []string{
		`machine edge-4: is on tier 2 because its tier says so, though tiers.2.select "site in (fra1, ams2)" does not match its labels {ring=canary}; the tier it names wins`,
	}, c.Warnings())

	sel, err := selector.Parse("ring=canary, site!=fra1")
	require.NoError(t, err)
	assert.Equal(t, []string{"edge-3", "edge-4"}, c.Selected(sel))
	// A --selector that does not parse is the CLI's to word
	// (internal/cli TestStatusSelector, "ring in canary").

	t.Setenv("MESHROLL_MACHINES_EDGE_2_TIER", "1")
	c, err = Parse("mesh.yaml", []byte(labelledMesh))
	require.NoError(t, err)
	assert.Equal(t, 1, c.Machines["edge-2"].Tier, "a tier a variable gives wins too")
	assert.False(t, c.Machines["edge-2"].TierBySelector)
}

// TestLabelProblems has one case per rule about labels and selectors:
// each problem names its key and its line.
func TestLabelProblems(t *testing.T) {
	tests := []struct {
		name, from, to string
		want           []Problem
	}{
		{
			name: "label key",
			from: "labels: {ring: main, site: ams2}", to: "labels: {-ring: main, site: ams2}",
			want: []Problem{{"machines.edge-2.labels.-ring", `"-ring" is not a label key: want an optional DNS subdomain prefix and '/' (at most 253 characters), then a name of at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit (line 7)`}},
		},
		{
			name: "label key prefix",
			from: "labels: {ring: main, site: ams2}", to: "labels: {ring: main, Example.com/site: ams2}",
			want: []Problem{{"machines.edge-2.labels.Example.com/site", `"Example.com/site" is not a label key: want an optional DNS subdomain prefix and '/' (at most 253 characters), then a name of at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit (line 7)`}},
		},
		{
			name: "label value",
			from: "labels: {ring: main, site: ams2}", to: "labels: {ring: main, site: \"ams 2\"}",
			want: []Problem{{"machines.edge-2.labels.site", `"ams 2" is not a label value: want empty, or at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit (line 7)`}},
		},
		{
			name: "labels not a mapping",
			from: "labels: {ring: main, site: ams2}", to: "labels: [ring]",
			want: []Problem{{"machines.edge-2.labels", "must be a mapping of label key to value, got a list (line 7)"}},
		},
		{
			name: "select does not parse",
			from: `select: "site in (fra1, ams2)"`, to: `select: "site in (fra1 ams2)"`,
			want: []Problem{
				{"machines.edge-2.tier", `missing, and no tier's select matches the machine's labels {ring=main,site=ams2} (tier 1 "ring=canary"); give it a tier, or labels that one of these matches (line 7)`},
				{"tiers.2.select", `selector "site in (fra1 ams2)": at position 15: want a comma or ) between values, got "a"; want requirements joined by commas, such as "ring=canary", "site in (fra1, ams2)", "gpu" or "!gpu" (line 12)`},
			},
		},
		{
			name: "select of a tier no one else is on does not parse",
			from: `select: "ring=canary"`, to: `select: "ring in canary"`,
			want: []Problem{{"tiers.1.select", `selector "ring in canary": at position 9: want ( after in; want requirements joined by commas, such as "ring=canary", "site in (fra1, ams2)", "gpu" or "!gpu" (line 11)`}},
		},
		{
			name: "machine no tier selects",
			from: "labels: {ring: main, site: ams2}", to: "labels: {ring: main, site: lon1}",
			want: []Problem{{"machines.edge-2.tier", `missing, and no tier's select matches the machine's labels {ring=main,site=lon1} (tier 1 "ring=canary", tier 2 "site in (fra1, ams2)"); give it a tier, or labels that one of these matches (line 7)`}},
		},
		{
			name: "select matches no machine",
			from: `select: "ring=canary"`, to: `select: "ring=canary-typo"`,
			want: []Problem{{"tiers.1", `no machine is on tier 1: its select "ring=canary-typo" matches no machine that is given no tier (machines are on tiers 2, 3); fix the selector or the labels, or remove the tier (line 11)`}},
		},
		{
			name: "selected onto the control node's tier",
			from: `2: {select: "site in (fra1, ams2)"}`, to: `2: {select: "site in (fra1, ams2), ring!=main"}` + "\n  4: {select: \"ring=main\"}",
			want: []Problem{
				{"machines.control-node.tier", "runs the control plane (mesh-controller) so must be in a tier above every other machine; edge-2 is in tier 4 (line 5)"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, labelledMesh, tt.from)
			src := strings.Replace(labelledMesh, tt.from, tt.to, 1)
			assert.Equal(t, tt.want, problemsOf(t, src), "problems of:\n%s", src)
		})
	}
}

// A config built in code places machines by label once ResolveTiers runs,
// and Validate names one no tier selects.
func TestLabelsBuiltInCode(t *testing.T) {
	c := Default()
	c.Modules["host"] = Module{Repo: "."}
	c.Machines["edge-1"] = Machine{Host: "http://127.0.0.1:7401", TierBySelector: true, Labels: map[string]string{"ring": "canary"}, Modules: []string{"host"}}
	c.Machines["edge-2"] = Machine{Host: "http://127.0.0.1:7402", Tier: 1, Modules: []string{"host"}}
	c.Tiers[0] = TierPolicy{MaxParallel: Amount{N: 1}, Select: "ring=canary"}
	c.Tiers[1] = DefaultTierPolicy()
	c.ResolveTiers()
	require.NoError(t, c.Validate())
	assert.Equal(t, 0, c.Machines["edge-1"].Tier)

	c.Tiers[0] = TierPolicy{MaxParallel: Amount{N: 1}, Select: "ring=main"}
	assert.EqualError(t, c.Validate(), "mesh config: 2 problems:\n"+
		`  machines.edge-1.tier: missing, and no tier's select matches the machine's labels {ring=canary} (tier 0 "ring=main"); give it a tier, or labels that one of these matches`+"\n"+
		`  tiers.0: no machine is on tier 0: its select "ring=main" matches no machine that is given no tier (machines are on tier 1); fix the selector or the labels, or remove the tier`)
}

package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// groupedMesh is four edges on two sites in tier 1, grouped by site, and
// the control node on tier 2.
const groupedMesh = `modules:
  mesh-controller: {repo: ., control_plane: true}
  host: {repo: .}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 2, modules: [mesh-controller, host]}
  edge-1: {host: http://127.0.0.1:7401, tier: 1, labels: {site: fra1, rack: r1}, modules: [host]}
  edge-2: {host: http://127.0.0.1:7402, tier: 1, labels: {site: ams2, rack: r1}, modules: [host]}
  edge-3: {host: http://127.0.0.1:7403, tier: 1, labels: {site: fra1, rack: r2}, modules: [host]}
  edge-4: {host: http://127.0.0.1:7404, tier: 1, labels: {site: ams2, rack: r2}, modules: [host]}
tiers:
  1: {max_parallel: 1, group_by: [site]}
`

// A tier's group_by gives each of its machines its group, carried by the
// plan's targets; other tiers' machines have none.
func TestGroupOf(t *testing.T) {
	c, err := Parse("mesh.yaml", []byte(groupedMesh))
	require.NoError(t, err)
	assert.Equal(t, []string{"site"}, c.Tiers[1].GroupBy)
	targets, err := c.Targets("host")
	require.NoError(t, err)
	groups := map[string]string{}
	for _, tg := range targets {
		groups[tg.Machine] = tg.Group
	}
	assert.Equal(t, map[string]string{"edge-1": "site=fra1", "edge-2": "site=ams2", "edge-3": "site=fra1", "edge-4": "site=ams2", "control-node": ""}, groups)

	c, err = Parse("mesh.yaml", []byte(strings.Replace(groupedMesh, "group_by: [site]", "group_by: [site, rack]", 1)))
	require.NoError(t, err)
	assert.Equal(t, "site=ams2,rack=r2", c.GroupOf("edge-4"), "labels in group_by's order")
}

// TestGroupProblems has one case per rule about group_by: each problem
// names its key and its line.
func TestGroupProblems(t *testing.T) {
	tests := []struct {
		name, from, to string
		want           []Problem
	}{
		{
			name: "a machine without the label",
			from: "labels: {site: ams2, rack: r2}", to: "labels: {rack: r2}",
			want: []Problem{{"machines.edge-4.labels.site", "missing: the machine is on tier 1, which groups its machines by site (tiers.1.group_by); give it a site label (line 9)"}},
		},
		{
			name: "a machine without labels",
			from: "labels: {site: ams2, rack: r2}, ", to: "",
			want: []Problem{{"machines.edge-4.labels.site", "missing: the machine is on tier 1, which groups its machines by site (tiers.1.group_by); give it a site label (line 9)"}},
		},
		{
			name: "a label no machine of the tier has",
			from: "group_by: [site]", to: "group_by: [zone]",
			want: []Problem{{"tiers.1.group_by", "no machine on tier 1 has the label zone (its machines are edge-1, edge-2, edge-3, edge-4); group by a label they have, or give them zone (line 11)"}},
		},
		{
			name: "group_by on a tier whose machines have no labels",
			from: "1: {max_parallel: 1, group_by: [site]}", to: "1: {max_parallel: 1}\n  2: {group_by: [site]}",
			want: []Problem{{"tiers.2.group_by", "no machine on tier 2 has the label site (its machines are control-node); group by a label they have, or give them site (line 12)"}},
		},
		{
			name: "not a label key",
			from: "group_by: [site]", to: "group_by: [site, -rack]",
			want: []Problem{{"tiers.1.group_by", `"-rack" is not a label key: want an optional DNS subdomain prefix and '/' (at most 253 characters), then a name of at most 63 characters: letters, digits, '-', '_' and '.', starting and ending with a letter or digit (line 11)`}},
		},
		{
			name: "a label twice",
			from: "group_by: [site]", to: "group_by: [site, site]",
			want: []Problem{{"tiers.1.group_by", "names site twice (line 11)"}},
		},
		{
			name: "not a list",
			from: "group_by: [site]", to: "group_by: {site: 1}",
			want: []Problem{{"tiers.1.group_by", "must be a list, such as [a, b], got a mapping (line 11)"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, groupedMesh, tt.from)
			src := strings.Replace(groupedMesh, tt.from, tt.to, 1)
			assert.Equal(t, tt.want, problemsOf(t, src), "problems of:\n%s", src)
		})
	}
	assert.Empty(t, problemsOf(t, groupedMesh))
}

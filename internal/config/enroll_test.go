package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/secret"
)

func TestEnrollProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		env  map[string]string
		want []Problem
	}{
		{
			name: "endpoint with a token and modules",
			src:  "worker:\n  enroll_listen: 127.0.0.1:8236\n  enroll_token_file: /run/enroll\nenroll:\n  modules: [host]\n",
		},
		{
			name: "endpoint without a token",
			src:  "worker:\n  enroll_listen: 127.0.0.1:8236\nenroll:\n  modules: [host]\n",
			want: []Problem{{"worker.enroll_listen", "the enrollment endpoint has no token: anyone who can post to 127.0.0.1:8236 could ask to join; set MESHROLL_WORKER_ENROLL_TOKEN (or worker.enroll_token_file) to the token agents start with (line 8)"}},
		},
		{
			name: "endpoint without modules for admitted machines",
			src:  "worker:\n  enroll_listen: 127.0.0.1:8236\n",
			env:  map[string]string{"MESHROLL_WORKER_ENROLL_TOKEN": "s3cret"},
			want: []Problem{{"worker.enroll_listen", "enroll.modules is empty: an admitted machine would run nothing; list the modules admitted machines run (line 8)"}},
		},
		{
			name: "endpoint address without a port",
			src:  "worker:\n  enroll_listen: localhost\n  enroll_token_file: /run/enroll\nenroll:\n  modules: [host]\n",
			want: []Problem{{"worker.enroll_listen", `"localhost" is not host:port; want an address to listen on, such as 127.0.0.1:9090 or :9090 (line 8)`}},
		},
		{
			name: "enrollment token given twice",
			src:  "worker:\n  enroll_token_file: /run/enroll\n",
			env:  map[string]string{"MESHROLL_WORKER_ENROLL_TOKEN": "s3cret"},
			want: []Problem{{"worker.enroll_token_file", "give the enrollment token either as worker.enroll_token or as a file, not both (line 8)"}},
		},
		{
			name: "host token given twice",
			src:  "enroll:\n  modules: [host]\n  host_token_file: /run/hosts\n",
			env:  map[string]string{"MESHROLL_ENROLL_HOST_TOKEN": "s3cret"},
			want: []Problem{{"enroll.host_token_file", "give admitted machines' host token either as enroll.host_token or as a file, not both (line 9)"}},
		},
		{
			name: "unknown and repeated modules",
			src:  "enroll:\n  modules: [host, metrix, host]\n",
			want: []Problem{
				{"enroll.modules", `lists "host" twice (line 8)`},
				{"enroll.modules", `unknown module "metrix"; modules are host, mesh-controller (line 8)`},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			assert.Equal(t, tc.want, problemsOf(t, valid+tc.src))
		})
	}
}

// An admitted machine joins the config with enroll.modules and the host
// token, on the tier its labels select or else the last before the control
// plane's; the file's
// machine of the same name wins; one that would make the config invalid
// is left out, with why, and the others still join.
func TestAdmit(t *testing.T) {
	src := `modules:
  mesh-controller: {repo: ., path: examples/controller, control_plane: true}
  host: {repo: ., path: examples/host}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 2, modules: [mesh-controller, host]}
  edge-1: {host: http://127.0.0.1:7401, tier: 1, modules: [host], labels: {site: fra1}}
  core-1: {host: http://127.0.0.1:7402, tier: 1, modules: [host], labels: {site: ams2}}
tiers:
  0: {select: "ring=canary"}
  1: {group_by: [site]}
enroll:
  modules: [host]
`
	t.Setenv("MESHROLL_ENROLL_HOST_TOKEN", "hosts-s3cret")
	cfg, err := Parse("mesh.yaml", []byte(src))
	require.NoError(t, err)
	got, left := cfg.Admit([]Admitted{
		{Name: "canary-1", Host: "http://127.0.0.1:7501", Labels: map[string]string{"ring": "canary"}},
		{Name: "late-1", Host: "http://127.0.0.1:7502", Labels: map[string]string{"site": "ams2"}},
		{Name: "nosite-1", Host: "http://127.0.0.1:7503"},
		{Name: "edge-1", Host: "http://127.0.0.1:7504"},
	})
	assert.Equal(t, []string{"canary-1", "control-node", "core-1", "edge-1", "late-1"}, got.MachineNames())
	canary := got.Machines["canary-1"]
	assert.Equal(t, 0, canary.Tier, "its labels select tier 0")
	assert.Equal(t, []string{"host"}, canary.Modules)
	assert.Equal(t, secret.String("hosts-s3cret"), canary.Token)
	assert.True(t, canary.Admitted)
	assert.Equal(t, 1, got.Machines["late-1"].Tier, "no select matches: the last tier before the control plane's")
	assert.Equal(t, "http://127.0.0.1:7401", got.Machines["edge-1"].Host, "the file's edge-1 stays")
	assert.False(t, got.Machines["edge-1"].Admitted)
	require.Len(t, left, 2)
	assert.Contains(t, left["edge-1"], "mesh.yaml names it too")
	assert.Contains(t, left["nosite-1"], "machines.nosite-1.labels")
	assert.Equal(t, []string{"control-node", "core-1", "edge-1"}, cfg.MachineNames(), "the file's config is not changed")
}

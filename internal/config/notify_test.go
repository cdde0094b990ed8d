package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNotifyProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []Problem
	}{
		{
			name: "a webhook and a slack target",
			src:  "notify:\n  fleet_url: https://meshroll.example.com/\n  targets:\n    team: {kind: webhook, url: 'https://hooks.example.com/m', secret: s, events: [plan_gated, plan_halted], modules: [host]}\n    chat: {kind: slack, url: 'https://chat.example.com/T/B/x'}\n",
		},
		{
			name: "unknown kind",
			src:  "notify:\n  targets:\n    team: {kind: email, url: 'https://hooks.example.com/m'}\n",
			want: []Problem{{"notify.targets.team.kind", `"email" is not a kind of target; want webhook or slack (line 9)`}},
		},
		{
			name: "no kind, no url",
			src:  "notify:\n  targets:\n    team: {events: [plan_gated]}\n",
			want: []Problem{
				{"notify.targets.team.kind", "missing; want webhook or slack (line 9)"},
				{"notify.targets.team.url", "missing; want the URL the events are posted to (line 9)"},
			},
		},
		{
			name: "url not http",
			src:  "notify:\n  targets:\n    team: {kind: webhook, url: 'ftp://hooks.example.com/m'}\n",
			want: []Problem{{"notify.targets.team.url", `"ftp://hooks.example.com/m" is not an http or https URL (line 9)`}},
		},
		{
			name: "unknown event and module",
			src:  "notify:\n  targets:\n    team: {kind: webhook, url: 'https://h.example.com/', events: [plan_done], modules: [db]}\n",
			want: []Problem{
				{"notify.targets.team.events", "unknown event \"plan_done\"; events are plan_started, plan_gated, plan_held, analysis_inconclusive, plan_halted, plan_refused, plan_aborted, plan_converged, plan_rolled_back, build_rejected (line 9)"},
				{"notify.targets.team.modules", "unknown module \"db\"; modules are host, mesh-controller (line 9)"},
			},
		},
		{
			name: "secret twice",
			src:  "notify:\n  targets:\n    team: {kind: webhook, url: 'https://h.example.com/', secret: s, secret_file: /run/s}\n",
			want: []Problem{{"notify.targets.team.secret_file", "give the target's secret either as notify.targets.team.secret or as a file, not both (line 9)"}},
		},
		{
			name: "slack with a secret",
			src:  "notify:\n  targets:\n    chat: {kind: slack, url: 'https://chat.example.com/x', secret: s}\n",
			want: []Problem{{"notify.targets.chat.secret", "a slack target signs nothing (its URL is its secret); drop it or make the target kind webhook (line 9)"}},
		},
		{
			name: "retry timings",
			src:  "notify:\n  targets:\n    team: {kind: webhook, url: 'https://h.example.com/', retry_first: 5s, retry_max: 1m, give_up_after: 2h}\n",
		},
		{
			name: "retry timings backwards",
			src:  "notify:\n  targets:\n    team: {kind: webhook, url: 'https://h.example.com/', retry_first: 20m, give_up_after: -1h}\n",
			want: []Problem{
				{"notify.targets.team.give_up_after", "-1h0m0s is negative; want a duration such as 30s, or leave it out for the default (line 9)"},
				{"notify.targets.team.retry_first", "20m0s is longer than retry_max (10m0s): the first wait is the shortest (line 9)"},
			},
		},
		{
			name: "fleet url without a host",
			src:  "notify:\n  fleet_url: 'https:///fleet'\n",
			want: []Problem{{"notify.fleet_url", `"https:///fleet" has no host; want the fleet page's address, such as https://meshroll.example.com/ (line 8)`}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, problemsOf(t, valid+tc.src))
		})
	}
}

// A target wants the events and modules it names, every one when it names
// none.
func TestNotifyTargetWants(t *testing.T) {
	all := NotifyTarget{}
	require.True(t, all.Wants("plan_halted", "web"))
	some := NotifyTarget{Events: []string{"plan_halted"}, Modules: []string{"web"}}
	require.True(t, some.Wants("plan_halted", "web"))
	require.False(t, some.Wants("plan_started", "web"))
	require.False(t, some.Wants("plan_halted", "db"))
}

// A target over plain http beyond loopback is warned of, without its URL's
// path (a Slack URL's secret) or the target's secret.
func TestNotifyWarnings(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"https://hooks.example.com/T1/B2/s3cretpath", ""},
		{"http://127.0.0.1:9000/hook", ""},
		{"http://hooks.example.com/T1/B2/s3cretpath", "notify.targets.team: posts to hooks.example.com over plain http"},
	} {
		got := (&Config{Notify: Notify{Targets: map[string]NotifyTarget{"team": {Kind: NotifyWebhook, URL: tc.url, Secret: "k3y"}}}}).Warnings()
		if tc.want == "" {
			assert.Empty(t, got, tc.url)
			continue
		}
		require.Len(t, got, 1)
		assert.Contains(t, got[0], tc.want)
		assert.NotContains(t, got[0], "s3cretpath")
		assert.NotContains(t, got[0], "k3y")
	}
}

// A target's secret can come from the environment, as every key can.
func TestNotifySecretFromTheEnvironment(t *testing.T) {
	t.Setenv("MESHROLL_NOTIFY_TARGETS_TEAM_SECRET", "from-env")
	cfg, err := Parse("mesh.yaml", []byte(valid+"notify:\n  targets:\n    team: {kind: webhook, url: 'https://h.example.com/'}\n"))
	require.NoError(t, err)
	key, err := cfg.Notify.Targets["team"].Key("team")
	require.NoError(t, err)
	require.Equal(t, "from-env", key.Reveal())
}

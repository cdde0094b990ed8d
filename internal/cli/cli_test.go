package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

const (
	commit = "0123456789abcdef0123456789abcdef01234567"
	// unreachable is a Temporal address nothing listens on.
	unreachable = "127.0.0.1:1"
)

const meshYAML = `temporal: {address: 127.0.0.1:1, namespace: default, task_queue: meshroll}
modules:
  mesh-controller: {repo: ., path: examples/controller, control_plane: true}
  host:            {repo: ., path: examples/host}
machines:
  control-node: {host: http://127.0.0.1:7400, tier: 2, modules: [mesh-controller, host]}
  edge-1:       {host: http://127.0.0.1:7401, tier: 1, modules: [host]}
`

func writeConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mesh.yaml")
	require.NoError(t, os.WriteFile(p, []byte(meshYAML), 0o600))
	return p
}

type result struct {
	stdout, stderr string
	err            error
	took           time.Duration
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	// Environment overrides would change what the config says.
	t.Setenv("MESHROLL_TEMPORAL_ADDRESS", "")
	t.Setenv(config.EnvConfig, "")
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := Execute(ctx, args, &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err, took: time.Since(start)}
}

func TestUnknownModuleNeverDials(t *testing.T) {
	cfg := writeConfig(t)
	r := run(t, "--config", cfg, "merge", "--module", "nope", "--commit", commit)
	require.Error(t, r.err)
	assert.Equal(t, `unknown module "nope" (known: host, mesh-controller); add it to modules: in `+cfg, r.err.Error())
	assert.NotContains(t, r.err.Error(), unreachable, "must refuse before dialing")
	assert.ErrorIs(t, r.err, config.ErrUnknownModule)
	assert.Equal(t, ExitUsage, ExitCode(r.err))
	assert.Empty(t, r.stdout)
}

func TestUnknownModuleBeforeMalformedCommit(t *testing.T) {
	r := run(t, "--config", writeConfig(t), "merge", "--module", "nope", "--commit", "abc")
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), `unknown module "nope"`)
}

func TestMalformedCommit(t *testing.T) {
	for _, c := range []string{"abc", strings.ToUpper(commit), commit[:12], commit + "0"} {
		r := run(t, "--config", writeConfig(t), "merge", "--module", "host", "--commit", c)
		require.Error(t, r.err, c)
		assert.Contains(t, r.err.Error(), `commit "`+c+`" is not a full commit id`)
		assert.NotContains(t, r.err.Error(), unreachable)
		assert.Equal(t, ExitUsage, ExitCode(r.err))
	}
}

func TestGateOnTierNoMachineHas(t *testing.T) {
	cfg := writeConfig(t)
	r := run(t, "--config", cfg, "merge", "--module", "host", "--commit", commit, "--gate", "1", "--gate", "3")
	require.Error(t, r.err)
	assert.Equal(t, "--gate 3: no machine running module host is on tier 3 (its tiers: 1, 2)", r.err.Error())
	assert.Equal(t, ExitUsage, ExitCode(r.err))

	// mesh-controller runs only on tier 2.
	r = run(t, "--config", cfg, "merge", "--module", "mesh-controller", "--commit", commit, "--gate", "1")
	require.Error(t, r.err)
	assert.Equal(t, "--gate 1: no machine running module mesh-controller is on tier 1 (its tiers: 2)", r.err.Error())
}

func TestPlanInput(t *testing.T) {
	cfg, err := config.Load(writeConfig(t))
	require.NoError(t, err)
	in, err := planInput(cfg, "mesh.yaml", mergeOpts{module: "host", commit: commit, gates: []int{2, 1, 2}, force: true})
	require.NoError(t, err)
	assert.Equal(t, meshapi.PlanInput{
		Module: "host", Commit: commit, Gates: []int{1, 2}, Policy: meshapi.DefaultPushPolicy, Force: true,
	}, in)
}

func TestTemporalUnreachable(t *testing.T) {
	cfg := writeConfig(t)
	for _, args := range [][]string{
		{"merge", "--module", "host", "--commit", commit, "--gate", "2"},
		{"merge", "--module", "host", "--commit", commit, "--wait", "--output", "json"},
		{"plan", "show", meshapi.PlanID("host", commit)},
		{"plan", "watch", meshapi.PlanID("host", commit)},
		{"plan", "list", "--module", "host"},
		{"plan", "approve", meshapi.PlanID("host", commit), "--tier", "2"},
		{"plan", "pause", meshapi.PlanID("host", commit)},
		{"plan", "resume", meshapi.PlanID("host", commit)},
		{"plan", "abort", meshapi.PlanID("host", commit), "--reason", "test"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			r := run(t, append([]string{"--config", cfg}, args...)...)
			require.Error(t, r.err)
			assert.Contains(t, r.err.Error(), "temporal unreachable at "+unreachable)
			assert.Contains(t, r.err.Error(), "start the dev stack (go run ./worker --dev", "a loopback address is the dev stack's")
			assert.Equal(t, ExitError, ExitCode(r.err))
			assert.Less(t, r.took, DialTimeout+2*time.Second, "an unreachable server must fail fast")
			assert.Empty(t, r.stdout)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	r := run(t, "--config", missing, "merge", "--module", "host", "--commit", commit)
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), missing)
	assert.Equal(t, ExitError, ExitCode(r.err))

	bad := filepath.Join(t.TempDir(), "mesh.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("modules:\n  host: {repo: ., path: x, bogus: 1}\n"), 0o600))
	r = run(t, "--config", bad, "plan", "show", "plan/host/"+commit)
	require.Error(t, r.err)
	assert.Contains(t, r.err.Error(), bad)
	assert.NotContains(t, r.err.Error(), "temporal")
}

func TestUsageErrors(t *testing.T) {
	cfg := writeConfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "starter"`},
		{[]string{"plan", "bogus"}, `unknown command "bogus" for "starter plan"`},
		{[]string{"merge", "--module", "host"}, `required flag(s) "commit" not set`},
		{[]string{"merge", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"merge", "--module", "host", "--commit", commit, "--gate", "x"}, `invalid argument "x" for "--gate"`},
		{[]string{"plan", "show"}, "takes one plan ID"},
		{[]string{"plan", "abort", "a", "b"}, "takes one plan ID"},
		{[]string{"plan", "approve", "x", "--tier", "one"}, `invalid argument "one" for "--tier"`},
		{[]string{"--output", "yaml", "plan", "show", "x"}, `unknown --output "yaml"`},
		{[]string{"--log-level", "loud", "plan", "show", "x"}, `unknown log level "loud"`},
	} {
		r := run(t, append([]string{"--config", cfg}, tc.args...)...)
		require.Error(t, r.err, tc.args)
		assert.Contains(t, r.err.Error(), tc.want, tc.args)
		assert.NotContains(t, r.err.Error(), "\n", "one line: %v", tc.args)
		assert.Equal(t, ExitUsage, ExitCode(r.err), tc.args)
	}
}

func TestHelpForEveryCommand(t *testing.T) {
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string{}, path...), sub.Name()))
		}
	}
	walk((&app{}).rootCommand(), nil)
	require.GreaterOrEqual(t, len(paths), 13, "root, merge, plan, list, show, watch, approve, pause, resume, abort, machine, list, show")

	for _, path := range paths {
		for _, help := range []string{"--help", "-h"} {
			r := run(t, append(append([]string{}, path...), help)...)
			require.NoError(t, r.err, "%v %s", path, help)
			assert.Contains(t, r.stdout, "Usage:", "%v", path)
			assert.Contains(t, r.stdout, "starter "+strings.Join(path, " "), "%v", path)
			assert.Contains(t, r.stdout, "--config", "persistent flags shown for %v", path)
		}
	}
	// No command at all shows the root's help.
	r := run(t)
	require.NoError(t, r.err)
	assert.Contains(t, r.stdout, "Available Commands:")
}

// No flag's help ends mid-sentence: a usage string ending in ':' promises
// a list that never comes.
func TestFlagUsageIsWhole(t *testing.T) {
	var walk func(c *cobra.Command)
	flags := 0
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			flags++
			usage := strings.TrimSpace(f.Usage)
			assert.NotEmpty(t, usage, "%s --%s has no help", c.CommandPath(), f.Name)
			for _, end := range []string{":", ":)", "(", ","} {
				assert.False(t, strings.HasSuffix(usage, end), "%s --%s: help ends in %q: %q", c.CommandPath(), f.Name, end, usage)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk((&app{}).rootCommand())
	require.Greater(t, flags, 20, "the walk reached the subcommands' flags")
}

func TestExitCode(t *testing.T) {
	assert.Equal(t, ExitOK, ExitCode(nil))
	assert.Equal(t, ExitError, ExitCode(errors.New("boom")))
	assert.Equal(t, ExitUsage, ExitCode(&UsageError{Err: errors.New("bad")}))
	ended := &PlanEndedError{State: meshapi.PlanState{Plan: "plan/host/x", State: meshapi.PlanHalted, Reason: "tier 1 halted"}}
	assert.Equal(t, ExitPlanFailed, ExitCode(ended))
	assert.Equal(t, ExitPlanFailed, ExitCode(errors.Join(errors.New("x"), ended)))
	assert.Equal(t, "plan plan/host/x ended halted: tier 1 halted", ended.Error())
}

func TestErrorWording(t *testing.T) {
	id := meshapi.PlanID("host", commit)
	err := planError(id, errors.Join(plans.ErrNotFound, errors.New(id)))
	assert.Equal(t, "plan "+id+` not found; check the module and commit, or list plans with "starter plan list"`, err.Error())
	assert.ErrorIs(t, err, plans.ErrNotFound)

	other := errors.New("describe plan x: boom")
	assert.Equal(t, other, planError(id, other))
}

func TestProgressLines(t *testing.T) {
	var b bytes.Buffer
	elapsed := 12300 * time.Millisecond
	p := newProgressPrinter(&b, func() time.Duration { return elapsed })
	st := meshapi.PlanState{Plan: "plan/host/c", State: meshapi.PlanPushing, Tiers: []meshapi.TierState{
		{Tier: 1, State: meshapi.TierPushing, Machines: []meshapi.MachineProgress{
			{Machine: "edge-1", State: meshapi.MachineConverged}, {Machine: "edge-2", State: meshapi.MachinePushing}}},
		{Tier: 2, State: meshapi.TierWaiting, Machines: []meshapi.MachineProgress{{Machine: "control-node", State: meshapi.MachineWaiting}}},
	}}
	p.show(st)
	assert.Equal(t, "[12.3s] plan/host/c pushing\n"+
		"[12.3s] tier 1: pushing  edge-1=converged edge-2=pushing\n"+
		"[12.3s] tier 2: waiting  control-node=waiting\n", b.String())

	// Only what changed is printed again; a terminal state is left to the
	// caller's final line.
	b.Reset()
	st.State = meshapi.PlanConverged
	st.Tiers[0].Machines[1].State = meshapi.MachineConverged
	st.Tiers[0].State = meshapi.TierConverged
	elapsed = 83 * time.Second
	p.show(st)
	require.NoError(t, p.final(st))
	assert.Equal(t, "[1m23.0s] tier 1: converged  edge-1=converged edge-2=converged\n"+
		"[1m23.0s] plan/host/c converged\n", b.String())

	// Without a clock there is no prefix.
	b.Reset()
	require.NoError(t, newProgressPrinter(&b, nil).final(st))
	assert.Equal(t, "plan/host/c converged\n", b.String())
}

// largeTier is a pushing tier of n machines (m00, m01, ...): the last
// three pushing, those at failed failed, the rest converged.
func largeTier(n int, failed ...int) meshapi.TierState {
	t := meshapi.TierState{Tier: 1, State: meshapi.TierPushing}
	for i := range n {
		m := meshapi.MachineProgress{Machine: fmt.Sprintf("m%02d", i), State: meshapi.MachineConverged}
		switch {
		case i >= n-3:
			m.State = meshapi.MachinePushing
		case slices.Contains(failed, i):
			m.State = meshapi.MachineFailed
		}
		t.Machines = append(t.Machines, m)
	}
	return t
}

// grouped pushes a tier by site: its first 13 machines in site=a, the
// others in site=b.
func grouped(t meshapi.TierState) meshapi.TierState {
	t.Policy = &meshapi.TierPolicy{Tier: t.Tier, GroupBy: []string{"site"}, Groups: []meshapi.GroupBudget{
		{Group: "site=a", Machines: 13, MaxFailed: 1}, {Group: "site=b", Machines: len(t.Machines) - 13, MaxFailed: 2},
	}}
	for i := range t.Machines {
		t.Machines[i].Group = "site=a"
		if i >= 13 {
			t.Machines[i].Group = "site=b"
		}
	}
	return t
}

// A large tier's line prints again when a machine fails or the tier's
// state moves, but when only its counts move at most every countsEvery:
// following a tier of thousands, a line every poll would bury the ones
// that matter.
func TestProgressOfALargeTier(t *testing.T) {
	var b bytes.Buffer
	var elapsed time.Duration
	p := newProgressPrinter(&b, func() time.Duration { return elapsed })
	st := meshapi.PlanState{Plan: "plan/host/c", State: meshapi.PlanPushing}
	lines := func() []string {
		defer b.Reset()
		return strings.Split(strings.TrimSpace(b.String()), "\n")
	}
	at := func(d time.Duration, tier meshapi.TierState) []string {
		elapsed = d
		st.Tiers = []meshapi.TierState{tier}
		p.show(st)
		return lines()
	}
	assert.Equal(t, []string{"[0.0s] plan/host/c pushing", "[0.0s] tier 1: pushing  30 machines: 3 pushing, 27 converged"}, at(0, largeTier(30)))
	moved := largeTier(30)
	moved.Machines[0].State = meshapi.MachinePushing
	assert.Equal(t, []string{""}, at(time.Second, moved), "only its counts moved, a second later")
	assert.Equal(t, []string{""}, at(countsEvery-time.Millisecond, moved))
	assert.Equal(t, []string{"[10.0s] tier 1: pushing  30 machines: 4 pushing, 26 converged"}, at(countsEvery, moved), "its counts, countsEvery later")
	assert.Equal(t, []string{"[11.0s] tier 1: pushing  30 machines: 1 failed, 3 pushing, 26 converged; m05=failed"}, at(11*time.Second, largeTier(30, 5)),
		"a failure at once")
	done := largeTier(30, 5)
	done.State = meshapi.TierHalted
	assert.Equal(t, []string{"[11.5s] tier 1: halted  30 machines: 1 failed, 3 pushing, 26 converged; m05=failed"}, at(11500*time.Millisecond, done),
		"and the tier's end at once")
}

func TestShowTable(t *testing.T) {
	var b bytes.Buffer
	a := &app{stdout: &b}
	require.NoError(t, a.printState(meshapi.PlanState{
		Plan: "plan/host/c", Module: "host", Commit: "c", State: meshapi.PlanHalted, Reason: "tier 1 halted",
		Tiers: []meshapi.TierState{{Tier: 1, State: meshapi.TierHalted, Machines: []meshapi.MachineProgress{
			{Machine: "edge-1", State: meshapi.MachineConverged, Seq: 7, Rebased: []string{"proxy"}},
			{Machine: "edge-2", State: meshapi.MachineFailed, Reason: "host unreachable"},
			{Machine: "edge-3", State: meshapi.MachinePushing, Reason: meshapi.WaitsItsTurn + ": the plan has 1 pushes handed over and unanswered at most (push.hand_window)"},
		}}},
	}, "", measurementLimit{n: DefaultMeasurements}, nil))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 6)
	assert.Equal(t, "plan plan/host/c  module host  commit c  state halted  reason tier 1 halted", lines[0])
	assert.Empty(t, lines[1])
	assert.Regexp(t, `^TIER\s+MACHINE\s+STATE\s+SEQ\s+REASON$`, lines[2])
	assert.Regexp(t, `^1 \(halted\)\s+edge-1\s+converged\s+7\s+rebased proxy$`, lines[3])
	assert.Regexp(t, `^1 \(halted\)\s+edge-2\s+failed\s+-\s+host unreachable$`, lines[4])
	assert.Regexp(t, `^1 \(halted\)\s+edge-3\s+waiting-turn\s+-\s+waits its turn: `, lines[5], "a push not yet handed over does not read pushing")

	// A tier of more than listTierUpTo machines is counted under its rows.
	b.Reset()
	require.NoError(t, a.printState(meshapi.PlanState{Plan: "plan/host/c", Module: "host", Commit: "c", State: meshapi.PlanPushing,
		Tiers: []meshapi.TierState{largeTier(listTierUpTo+5, 3, 9)}}, "", measurementLimit{n: DefaultMeasurements}, nil))
	lines = strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 3+listTierUpTo+5+1)
	assert.Regexp(t, `^1 \(pushing\)\s+m24\s+pushing`, lines[len(lines)-2])
	assert.Equal(t, "  tier 1: 25 machines: 2 failed, 3 pushing, 20 converged", lines[len(lines)-1])

	// --machines lists only the machines in the states it names, and
	// counts every tier under its rows.
	var only machineStates
	require.NoError(t, only.Set("failed, Refused"))
	b.Reset()
	require.NoError(t, a.printState(meshapi.PlanState{Plan: "plan/host/c", Module: "host", Commit: "c", State: meshapi.PlanPushing,
		Tiers: []meshapi.TierState{largeTier(listTierUpTo+5, 3, 9), {Tier: 2, State: meshapi.TierWaiting,
			Machines: []meshapi.MachineProgress{{Machine: "control-node", State: meshapi.MachineWaiting}}}}}, "", measurementLimit{n: DefaultMeasurements}, only))
	lines = strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 7, b.String())
	assert.Regexp(t, `^1 \(pushing\)\s+m03\s+failed`, lines[3])
	assert.Regexp(t, `^1 \(pushing\)\s+m09\s+failed`, lines[4])
	assert.Equal(t, "  tier 1: 25 machines: 2 failed, 3 pushing, 20 converged", lines[5])
	assert.Equal(t, "  tier 2: 1 machine, waiting", lines[6])
	assert.Equal(t, "failed,refused", only.String())

	// None in those states: said in words, not as a header over no rows.
	b.Reset()
	require.NoError(t, a.printState(meshapi.PlanState{Plan: "plan/host/c", Module: "host", Commit: "c", State: meshapi.PlanConverged,
		Tiers: []meshapi.TierState{largeTier(listTierUpTo + 5)}}, "", measurementLimit{n: DefaultMeasurements}, only))
	assert.Equal(t, "plan plan/host/c  module host  commit c  state converged  reason -\n\nno machine is failed or refused\n  tier 1: 25 machines: 3 pushing, 22 converged\n", b.String())

	err := only.Set("broken")
	require.Error(t, err)
	assert.Equal(t, `no machine state "broken"; a machine in a plan is failed, refused, reverting, pushing, waiting-turn, waiting, reverted, converged, superseded, cancelled, skipped`, err.Error())
}

func TestTierLine(t *testing.T) {
	until := time.Date(2026, 12, 3, 14, 5, 0, 0, time.UTC)
	ms := []meshapi.MachineProgress{{Machine: "e1", State: meshapi.MachineConverged}, {Machine: "e2", State: meshapi.MachinePushing}}
	for _, tc := range []struct {
		name string
		tier meshapi.TierState
		want string
	}{
		{"as before", meshapi.TierState{Tier: 1, State: meshapi.TierPushing, Machines: ms}, "tier 1: pushing  e1=converged e2=pushing"},
		{"in batches", meshapi.TierState{Tier: 1, State: meshapi.TierPushing, Machines: ms, Batch: 2, Batches: 3}, "tier 1: pushing (batch 2 of 3)  e1=converged e2=pushing"},
		{"a failure within budget", meshapi.TierState{Tier: 1, State: meshapi.TierPushing, Machines: ms, Failed: 1, Policy: &meshapi.TierPolicy{MaxFailed: 1}}, "tier 1: pushing (1 failed of 1 allowed)  e1=converged e2=pushing"},
		{"baking", meshapi.TierState{Tier: 1, State: meshapi.TierBaking, Machines: ms, BakeUntil: &until}, "tier 1: baking (until 14:05:00 UTC)  e1=converged e2=pushing"},
		{"handed over in windows", meshapi.TierState{Tier: 1, State: meshapi.TierPushing, Window: 1, Machines: []meshapi.MachineProgress{
			{Machine: "e1", State: meshapi.MachinePushing},
			{Machine: "e2", State: meshapi.MachinePushing, Reason: meshapi.WaitsItsTurn + ": the plan has 1 pushes handed over and unanswered at most (push.hand_window)"},
		}}, "tier 1: pushing (handed over 1 at a time)  e1=pushing e2=waiting-turn"},
		{"a tier too large to name each machine", largeTier(listTierUpTo+5, 3, 9), "tier 1: pushing  25 machines: 2 failed, 3 pushing, 20 converged; m03=failed m09=failed"},
		{"and its failures past the first few", largeTier(listTierUpTo+5, 0, 1, 2, 3, 4, 5, 6), "tier 1: pushing  25 machines: 7 failed, 3 pushing, 15 converged; m00=failed m01=failed m02=failed m03=failed m04=failed and 2 more (plan show --machines failed,refused,reverting,reverted lists them)"},
		{"pushed by group", grouped(largeTier(listTierUpTo+5, 3, 15)), "tier 1: pushing (site=a 12/13 1 failed of 1 allowed, site=b 8/12 1 failed of 2 allowed)  25 machines: 2 failed, 3 pushing, 20 converged; m03=failed m15=failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := tierLine(tc.tier); got != tc.want {
				t.Errorf("tierLine = %q, want %q", got, tc.want)
			}
			// Following a plan reads its summary (plans.Progress), in
			// which a large tier is its counts: the line reads the same.
			sum := meshapi.PlanState{Tiers: []meshapi.TierState{tc.tier}}.Summarised().Tiers[0]
			if got, _ := tierLine(sum); got != tc.want {
				t.Errorf("tierLine of the summary = %q, want %q", got, tc.want)
			}
		})
	}
}

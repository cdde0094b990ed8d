package testsuite

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// The race suite's knobs. They are test-binary flags defined at package
// level (package testsuite has no TestMain; the testing package parses them
// with its own), each defaulting to an environment variable so that CI can
// set them without touching the command line:
//
//	go test -count=1 -run TestRaceSuite -v ./testsuite -args -race.seed=1234
//	go test -count=1 -run TestRaceSuite -v ./testsuite -args -race.rounds=5
//	go test -count=1 -run TestRaceSuite -v -timeout 60m ./testsuite -args -race.soak
//	MESHROLL_RACE_SEED=1234 MESHROLL_RACE_SOAK=1 go test -run TestRaceSuite ./testsuite
//
// The seed is always logged, and named in every failure, so that a failing
// order can be run again.
var (
	raceSeed   = flag.Int64("race.seed", envInt64("MESHROLL_RACE_SEED", 0), "race suite: seed of the random orders (0: time-based); env MESHROLL_RACE_SEED")
	raceRounds = flag.Int("race.rounds", int(envInt64("MESHROLL_RACE_ROUNDS", 3)), "race suite: rounds of overlapping merges; env MESHROLL_RACE_ROUNDS")
	raceMerges = flag.Int("race.merges", int(envInt64("MESHROLL_RACE_MERGES", 8)), "race suite: merges per round; env MESHROLL_RACE_MERGES")
	raceSoak   = flag.Bool("race.soak", envBool("MESHROLL_RACE_SOAK"), "race suite: soak (at least 25 rounds of 12 merges); env MESHROLL_RACE_SOAK")
)

func envInt64(name string, def int64) int64 {
	if v, err := strconv.ParseInt(os.Getenv(name), 10, 64); err == nil {
		return v
	}
	return def
}

func envBool(name string) bool {
	v, _ := strconv.ParseBool(os.Getenv(name))
	return v
}

// raceMesh is three modules on four machines in three tiers; the control
// node, which runs the control-plane module, is the last tier.
func raceMesh() stackOptions {
	return stackOptions{
		modules:      []string{"mesh-controller", "host", "metrics"},
		controlPlane: []string{"mesh-controller"},
		machines: []machineSpec{
			{name: "e1", tier: 0, modules: []string{"host", "metrics"}},
			{name: "e2", tier: 1, modules: []string{"host"}},
			{name: "e3", tier: 1, modules: []string{"metrics", "host"}},
			{name: "control-node", tier: 2, modules: []string{"mesh-controller", "host", "metrics"}},
		},
	}
}

// raceMerge is one merge of a round and what became of its plan.
// raceLastTiers is, by module, the last tier with a machine running it.
func raceLastTiers(machines []machineSpec) map[string]int {
	last := map[string]int{}
	for _, m := range machines {
		for _, mod := range m.modules {
			last[mod] = max(last[mod], m.tier)
		}
	}
	return last
}

// raceCommits makes a round's merges: every module at least once (so that
// every machine runs every module it should from the first round on), the
// rest at random up to merges, committed in a random order; the order of
// commits is the order of generations.
func raceCommits(s *stack, rng *rand.Rand, modules []string, merges int) []*raceMerge {
	mods := slices.Clone(modules)
	for len(mods) < merges {
		mods = append(mods, modules[rng.IntN(len(modules))])
	}
	rng.Shuffle(len(mods), func(i, j int) { mods[i], mods[j] = mods[j], mods[i] })
	ms := make([]*raceMerge, len(mods))
	for i, mod := range mods {
		ms[i] = &raceMerge{module: mod, commit: s.commit(mod)}
	}
	return ms
}

// raceSeedNow is the seed a race test runs with: -race.seed, else one from
// the clock.
func raceSeedNow() int64 {
	if *raceSeed != 0 {
		return *raceSeed
	}
	return time.Now().UnixNano()
}

// raceFollower waits for a round's plans in the background, each plan's end
// into its raceMerge.
type raceFollower struct {
	s  *stack
	wg sync.WaitGroup
}

// follow waits for m's plan (started, or just approved) to end.
func (f *raceFollower) follow(m *raceMerge) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		m.final, m.err = plans.Wait(ctx, f.s.c, m.id, 200*time.Millisecond, nil)
	}()
}

// wait returns once every plan followed so far has ended.
func (f *raceFollower) wait() { f.wg.Wait() }

type raceMerge struct {
	module string
	commit string
	gated  bool
	// hold: the starter waits for this gated plan to reach its gate (so it
	// has composed every machine) before starting the next plan, which
	// forces later merges to run past a plan with stale compositions.
	hold  bool
	id    string
	final meshapi.PlanState
	err   error
}

// Many merges to several modules across machines in several tiers, started
// in randomised, overlapping orders, some held at the last tier's gate
// while newer builds of other modules (and of their own) roll out past
// them. Checked against the hosts' own journals: no machine's generation of
// any module ever goes down, no two applies to one machine overlap, every
// plan ends converged or superseded, and every machine ends on the newest
// build of every module it runs.
func TestRaceSuite(t *testing.T) {
	t.Parallel()
	seed := raceSeedNow()
	rounds, merges := *raceRounds, *raceMerges
	if *raceSoak {
		rounds, merges = max(rounds, 25), max(merges, 12)
	}
	t.Logf("race suite: seed %d, %d rounds of %d merges (reproduce with -args -race.seed=%d -race.rounds=%d -race.merges=%d)",
		seed, rounds, merges, seed, rounds, merges)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("race suite FAILED with seed %d: go test -count=1 -run TestRaceSuite -v ./testsuite -args -race.seed=%d -race.rounds=%d -race.merges=%d",
				seed, seed, rounds, merges)
		}
	})
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6d657368726f6c6c))
	tag := fmt.Sprintf("(seed %d)", seed)

	o := raceMesh()
	s := newStack(t, o)
	runsOn := map[string][]string{} // module -> machines
	for _, m := range o.machines {
		for _, mod := range m.modules {
			runsOn[mod] = append(runsOn[mod], m.name)
		}
	}
	lastTier := raceLastTiers(o.machines)

	newest := map[string]string{} // module -> newest commit made so far
	var all []*raceMerge
	for round := range rounds {
		ms := raceCommits(s, rng, o.modules, merges)
		for _, m := range ms {
			newest[m.module] = m.commit
		}

		// Start order: a different shuffle. Some plans are gated before
		// their last tier; at least one of them holds the starter until it
		// is gated, so whatever starts after it rolls out past its stale
		// compositions.
		order := slices.Clone(ms)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for i, m := range order {
			m.gated = i < len(order)-1 && rng.IntN(10) < 3
			m.hold = m.gated && rng.IntN(2) == 0
		}
		if !slices.ContainsFunc(order, func(m *raceMerge) bool { return m.hold }) {
			m := order[rng.IntN(len(order)/2)]
			m.gated, m.hold = true, true
		}
		var desc []string
		for _, m := range order {
			d := fmt.Sprintf("%s@%d", m.module, slices.Index(ms, m)+1)
			if m.hold {
				d += "[hold]"
			} else if m.gated {
				d += "[gated]"
			}
			desc = append(desc, d)
		}
		t.Logf("round %d %s: start order %s", round+1, tag, strings.Join(desc, " "))

		f := &raceFollower{s: s}
		for _, m := range order {
			if m.gated {
				m.id = s.start(m.module, m.commit, lastTier[m.module]).ID
			} else {
				m.id = s.start(m.module, m.commit).ID
				f.follow(m)
			}
			if m.hold {
				st := waitFor(t, s, m.id, meshapi.PlanGated, tag)
				t.Logf("round %d: %s gated at tier %d; later merges go past it", round+1, m.id, st.Tiers[len(st.Tiers)-1].Tier)
			}
			time.Sleep(time.Duration(rng.IntN(120)) * time.Millisecond) // staggers starts only
		}

		// Every plan not gated ends while the gated ones wait.
		f.wait()
		var gated []*raceMerge
		for _, m := range order {
			if m.gated {
				gated = append(gated, m)
			}
		}
		for _, m := range gated {
			waitFor(t, s, m.id, meshapi.PlanGated, tag)
		}
		// Then the gates open in a random order.
		rng.Shuffle(len(gated), func(i, j int) { gated[i], gated[j] = gated[j], gated[i] })
		for _, m := range gated {
			_, err := controlPlan(s, m.id, meshapi.UpdateApprove, meshapi.ApproveInput{By: "race suite"})
			require.NoError(t, err, "approve %s %s", m.id, tag)
			f.follow(m)
			time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond) // staggers approvals only
		}
		f.wait()

		for _, m := range ms {
			require.NoError(t, m.err, "%s %s", m.id, tag)
			require.Contains(t, []meshapi.PlanStatus{meshapi.PlanConverged, meshapi.PlanSuperseded}, m.final.State,
				"round %d: %s ended %s: %s %s", round+1, m.id, m.final.State, m.final.Reason, tag)
			require.NotNil(t, m.final.Build, "%s has its build %s", m.id, tag)
		}
		all = append(all, ms...)
		raceCheck(t, s, o, runsOn, newest, all, tag)
		var ends []string
		for _, m := range ms {
			ends = append(ends, fmt.Sprintf("%s@g%d=%s", m.module, m.final.Build.Generation, m.final.State))
		}
		t.Logf("round %d %s: %s", round+1, tag, strings.Join(ends, " "))
	}

	// Summary, from the plans' answers and the hosts' journals.
	superseded, rebased := 0, 0
	for _, m := range all {
		if m.final.State == meshapi.PlanSuperseded {
			superseded++
		}
		for _, tier := range m.final.Tiers {
			for _, mp := range tier.Machines {
				if len(mp.Rebased) > 0 {
					rebased++
				}
			}
		}
	}
	downgrades, overlaps := 0, 0
	var applied []string
	for _, m := range o.machines {
		h := s.hosts[m.name]
		d, ov := raceJournalFaults(t, s, m.name)
		downgrades += d
		overlaps += ov
		applied = append(applied, fmt.Sprintf("%s %d", m.name, len(h.Applied())))
	}
	require.Zero(t, downgrades, "downgrades in the journals %s", tag)
	require.Zero(t, overlaps, "overlapping applies in the journals %s", tag)
	t.Logf("race summary: seed %d, rounds %d, plans %d, applied {%s}, superseded %d, rebased %d, downgrades %d, overlaps %d",
		seed, rounds, len(all), strings.Join(applied, ", "), superseded, rebased, downgrades, overlaps)
}

// raceCheck asserts, after a round, what must hold whatever the order.
func raceCheck(t *testing.T, s *stack, o stackOptions, runsOn map[string][]string, newest map[string]string, all []*raceMerge, tag string) {
	t.Helper()
	for _, m := range o.machines {
		s.checkJournal(m.name)
		d, ov := raceJournalFaults(t, s, m.name)
		require.Zero(t, d, "%s: generation went down in the journal %s", m.name, tag)
		require.Zero(t, ov, "%s: applies overlapped in the journal %s", m.name, tag)
	}

	// Every machine runs, by its own report, the newest build of every
	// module it runs; newest is the last commit made, which the catalogue
	// must also hold as the module's highest generation.
	gen := map[string]int64{}
	for mod, commit := range newest {
		b := s.build(mod, commit)
		nb, ok, err := s.cat.Newest(context.Background(), mod)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, b.Digest, nb.Digest, "%s: the last commit is the newest build %s", mod, tag)
		gen[mod] = b.Generation
	}
	for _, m := range o.machines {
		var want []mesh.Build
		for _, mod := range m.modules {
			want = append(want, s.build(mod, newest[mod]))
		}
		s.runs(m.name, want...)
	}

	// A plan that ended superseded sent nothing anywhere, and on every
	// machine it targets a newer build of its module was applied by
	// another plan and runs now.
	for _, pm := range all {
		if pm.final.State != meshapi.PlanSuperseded {
			continue
		}
		g := pm.final.Build.Generation
		for _, machine := range runsOn[pm.module] {
			h := s.hosts[machine]
			newer := false
			for _, d := range h.Received() {
				require.NotEqual(t, pm.id, d.Plan, "superseded %s sent declaration %d to %s %s", pm.id, d.Seq, machine, tag)
			}
			for _, d := range h.Applied() {
				if c, ok := d.Container(pm.module); ok && c.Generation > g {
					newer = true
				}
			}
			require.True(t, newer, "superseded %s (generation %d): nothing newer of %s was ever applied on %s %s", pm.id, g, pm.module, machine, tag)
			r, ok := h.Report().Running(pm.module)
			require.True(t, ok, "%s runs no %s %s", machine, pm.module, tag)
			b, known, err := s.cat.Lookup(context.Background(), r.Digest)
			require.NoError(t, err)
			require.True(t, known, "%s runs an unknown %s %s", machine, pm.module, tag)
			require.Greater(t, b.Generation, g, "superseded %s: %s runs %s generation %d %s", pm.id, machine, pm.module, b.Generation, tag)
			mp, _ := pm.final.Machine(machine)
			require.Equal(t, meshapi.MachineSuperseded, mp.State, "%s on %s %s", pm.id, machine, tag)
		}
	}
}

// raceJournalFaults counts, from a host's own journal, containers whose
// generation went down (by the generation told and by the catalogue's for
// the digest) and applies that began before the previous one's changed
// containers were journalled running. A rollback's declaration is the one
// sanctioned way down: it sets where the module stands from then on.
func raceJournalFaults(t *testing.T, s *stack, machine string) (downgrades, overlaps int) {
	t.Helper()
	high := map[string]int64{}
	running := map[string]string{} // module -> digest last journalled running
	var pending []mesh.Container   // changed containers of the last apply not yet running
	for _, e := range s.hosts[machine].journal() {
		switch e.Outcome {
		case agent.OutcomeApplied, agent.OutcomeRepeat, agent.OutcomeRefused, agent.OutcomeRunning:
		default:
			continue
		}
		for _, c := range e.Containers {
			g := c.Generation
			if b, ok, err := s.cat.Lookup(context.Background(), c.Digest); err == nil && ok {
				if b.Generation != c.Generation {
					t.Errorf("%s: journal entry %d tells %s generation %d, the catalogue has %d", machine, e.Index, c.Module, c.Generation, b.Generation)
				}
				g = min(g, b.Generation)
			}
			if e.Rollback && e.Outcome == agent.OutcomeApplied {
				high[c.Module] = g
			}
			if g < high[c.Module] {
				downgrades++
				t.Errorf("%s: journal entry %d (%s, seq %d, plan %s): %s generation %d after %d",
					machine, e.Index, e.Outcome, e.Seq, e.Plan, c.Module, g, high[c.Module])
			}
			high[c.Module] = max(high[c.Module], g)
		}
		switch e.Outcome {
		case agent.OutcomeApplied:
			if len(pending) > 0 {
				overlaps++
				t.Errorf("%s: journal entry %d applies seq %d (plan %s) while %d containers of the previous apply were not running yet",
					machine, e.Index, e.Seq, e.Plan, len(pending))
			}
			pending = pending[:0]
			for _, c := range e.Containers {
				if running[c.Module] != c.Digest {
					pending = append(pending, c)
				}
			}
		case agent.OutcomeRunning:
			for _, c := range e.Containers {
				running[c.Module] = c.Digest
				pending = slices.DeleteFunc(pending, func(p mesh.Container) bool { return p.Module == c.Module && p.Digest == c.Digest })
			}
		}
	}
	return downgrades, overlaps
}

package testsuite

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// raceRejection is a build rejected during a round, and each host's last
// sequence when the rejection had been recorded: a declaration after the
// one each machine may have had in flight then was checked after it.
type raceRejection struct {
	module, digest string
	lastSeq        map[string]uint64
}

// The race suite with the operator's levers among the merges (issue 14):
// in each round overlapping merges roll out while a build of the round is
// rejected and a gated plan waits; then a module is rolled back; then the
// gates open, and a last merge of every module rolls forward. Checked
// against the hosts' own journals: nothing ever goes below a floor except
// by a rollback plan; a rejected build is never newly sent to a machine
// once its rejection is recorded (a machine already running it keeps it);
// no two applies to one machine overlap; every plan ends converged,
// superseded, or refused because its build was rejected; and every machine
// ends on the newest build of every module it runs.
func TestRaceSuiteWithRejectionsAndRollbacks(t *testing.T) {
	t.Parallel()
	seed := raceSeedNow()
	rounds, merges := max(*raceRounds-1, 1), max(*raceMerges-2, 4)
	if *raceSoak {
		rounds, merges = max(rounds, 10), max(merges, 10)
	}
	tag := fmt.Sprintf("(seed %d)", seed)
	t.Logf("race suite with levers: seed %d, %d rounds of %d merges (reproduce with -args -race.seed=%d)", seed, rounds, merges, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6c6576657273))

	o := raceMesh()
	s := newStack(t, o)
	lastTier := raceLastTiers(o.machines)
	for _, mod := range o.modules { // every machine runs every module it should
		s.converge(mod, s.commit(mod))
	}
	lastSeqs := func() map[string]uint64 {
		seqs := map[string]uint64{}
		for _, m := range o.machines {
			seqs[m.name] = s.hosts[m.name].Report().LastSeq
		}
		return seqs
	}

	var rejections []raceRejection
	var rollbacks, refused int
	for round := range rounds {
		ms := raceCommits(s, rng, o.modules, merges)
		gated := ms[rng.IntN(len(ms))]
		gated.gated = true

		f := &raceFollower{s: s}
		gated.id = s.start(gated.module, gated.commit, lastTier[gated.module]).ID
		waitFor(t, s, gated.id, meshapi.PlanGated, tag)
		order := slices.Clone(ms)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		rejectAt := rng.IntN(len(order))
		for i, m := range order {
			if i == rejectAt {
				// Reject a build of the round while plans roll out: the
				// gated plan's, half the time, else any.
				victim := ms[rng.IntN(len(ms))]
				if rng.IntN(2) == 0 {
					victim = gated
				}
				out, err := s.starter("build", "reject", "--module", victim.module, "--commit", victim.commit,
					"--reason", "race suite", "--by", "race", "--output", "json")
				if err == nil || !strings.Contains(err.Error(), "no build of") {
					require.NoError(t, err, "%s %s", out, tag)
					rejections = append(rejections, raceRejection{module: victim.module, digest: s.digestOf(victim.module, victim.commit), lastSeq: lastSeqs()})
					t.Logf("round %d %s: rejected %s at %s", round+1, tag, victim.module, victim.commit[:7])
				} // a build not made yet (its plan has not built) cannot be rejected
			}
			if m != gated {
				m.id = s.start(m.module, m.commit).ID
				f.follow(m)
			}
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond) // staggers starts only
		}
		f.wait()

		// A rollback of a module, while the gated plan waits.
		mod := o.modules[rng.IntN(len(o.modules))]
		before := lastSeqs()
		out, err := s.starter("rollback", "--module", mod, "--reason", "race suite", "--by", "race", "--wait", "--output", "json")
		var rb struct {
			State  meshapi.PlanStatus
			Reason string
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rb), "%s %v %s", out, err, tag)
		require.Contains(t, []meshapi.PlanStatus{meshapi.PlanConverged, meshapi.PlanSuperseded, meshapi.PlanRefused}, rb.State,
			"rollback of %s: %s %s", mod, rb.Reason, tag)
		t.Logf("round %d %s: rollback of %s %s: %s", round+1, tag, mod, rb.State, rb.Reason)
		if rb.State == meshapi.PlanConverged {
			rollbacks++
			var list meshapi.BuildsResult
			out, err := s.starter("build", "list", "--module", mod, "--output", "json")
			require.NoError(t, err, out)
			require.NoError(t, json.Unmarshal([]byte(out), &list))
			for _, b := range list.Builds {
				if b.Rejected != nil && b.Rejected.By == meshapi.RollbackID(mod) && b.Rejected.Digest == b.Build.Digest {
					rejections = append(rejections, raceRejection{module: mod, digest: b.Build.Digest, lastSeq: before})
				}
			}
		}

		_, err = controlPlan(s, gated.id, meshapi.UpdateApprove, meshapi.ApproveInput{By: "race suite"})
		require.NoError(t, err, "approve %s %s", gated.id, tag)
		f.follow(gated)
		f.wait()
		for _, m := range ms {
			require.NoError(t, m.err, "%s %s", m.id, tag)
			switch m.final.State {
			case meshapi.PlanConverged, meshapi.PlanSuperseded:
			case meshapi.PlanRefused:
				require.Contains(t, m.final.Reason, "rejected by", "%s refused, not for a rejection %s", m.id, tag)
				refused++
			default:
				t.Fatalf("round %d: %s ended %s: %s %s", round+1, m.id, m.final.State, m.final.Reason, tag)
			}
		}

		// Roll forward: a new build of every module converges everywhere.
		for _, mod := range o.modules {
			s.converge(mod, s.commit(mod))
		}
		raceLeversCheck(t, s, o, rejections, tag)
	}
	t.Logf("race summary with levers: seed %d, rounds %d, rejections %d, rollbacks %d, plans refused as rejected %d",
		seed, rounds, len(rejections), rollbacks, refused)
}

// raceLeversCheck asserts, from every host's journal, the invariants as
// the levers restate them.
func raceLeversCheck(t *testing.T, s *stack, o stackOptions, rejections []raceRejection, tag string) {
	t.Helper()
	for _, m := range o.machines {
		s.checkJournal(m.name) // growing sequences; nothing below a floor but by a rollback
		d, ov := raceJournalFaults(t, s, m.name)
		require.Zero(t, d, "%s: a generation went down other than by a rollback %s", m.name, tag)
		require.Zero(t, ov, "%s: applies overlapped %s", m.name, tag)

		// A rejected digest is never newly sent: in a declaration after
		// the one the machine may have had in flight when it was rejected,
		// it appears only where the machine already ran it.
		ran := map[string]string{} // module -> digest of the last applied declaration
		for _, e := range s.hosts[m.name].journal() {
			if e.Outcome != agent.OutcomeApplied {
				continue
			}
			for _, c := range e.Containers {
				for _, r := range rejections {
					if c.Digest == r.digest && e.Seq > r.lastSeq[m.name]+1 && ran[c.Module] != c.Digest {
						t.Errorf("%s: declaration %d (plan %s) newly sends rejected %s %s %s", m.name, e.Seq, e.Plan, r.module, r.digest, tag)
					}
				}
			}
			clear(ran)
			for _, c := range e.Containers {
				ran[c.Module] = c.Digest
			}
		}
	}
	for _, m := range o.machines {
		for _, mod := range m.modules {
			nb, ok, err := s.cat.Newest(context.Background(), mod)
			require.NoError(t, err)
			require.True(t, ok)
			s.runs(m.name, nb)
		}
	}
}

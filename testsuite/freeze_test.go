package testsuite

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// A freeze (issue 14) taken from the starter while a plan waits between
// tiers, on the real worker, catalogue and hosts: approved, the plan holds
// before tier 2, says so in plan show, and the control node is sent
// nothing; unfreezing tells it and it converges by itself.
func TestFreezeHoldsAPlanBetweenTiers(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	_, h2, held := s.heldAtTier2("host")
	before := len(s.hosts["control-node"].Applied())

	out, err := s.starter("freeze", "--module", "host", "--reason", "incident 42", "--by", "alice", "--output", "json")
	require.NoError(t, err, out)
	var f mesh.Freeze
	require.NoError(t, json.Unmarshal([]byte(out), &f), out)
	require.Equal(t, "host", f.Module)
	require.Equal(t, asked("alice"), f.By)
	// A freeze of another module holds nothing here; it stays after.
	_, err = s.starter("freeze", "--module", "mesh-controller", "--reason", "other", "--by", "carol")
	require.NoError(t, err)

	_, err = controlPlan(s, held, meshapi.UpdateApprove, meshapi.ApproveInput{By: "bob"})
	require.NoError(t, err)
	st := waitFor(t, s, held, meshapi.PlanHeld)
	require.Equal(t, "held: freeze by "+asked("alice")+": incident 42", st.Reason)
	require.Equal(t, meshapi.TierWaiting, st.Tiers[1].State)
	show, err := s.starter("plan", "show", held)
	require.NoError(t, err, show)
	require.Contains(t, show, "held: freeze by "+asked("alice")+": incident 42")
	require.Contains(t, show, "\nlift the freeze with: starter --config "+s.configPath+" unfreeze --module host; the plan then goes on by itself\n",
		"the command that lifts the freeze holding it, not the other module's")
	list, err := s.starter("freeze", "list")
	require.NoError(t, err, list)
	require.Contains(t, list, "incident 42")
	require.Len(t, s.hosts["control-node"].Applied(), before, "nothing was sent to the control node while frozen")

	out, err = s.starter("unfreeze", "--module", "host", "--by", "bob", "--output", "json")
	require.NoError(t, err, out)
	var res meshapi.UnfreezeResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res.Lifted, 1)
	require.Equal(t, f.ID, res.Lifted[0].ID)
	require.Equal(t, asked("bob"), res.Lifted[0].LiftedBy)
	require.Contains(t, res.Signalled, held)

	st = s.wait(held)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	b2 := s.build("host", h2)
	s.everywhere(b2)
	out, err = s.starter("freeze", "list", "--output", "json")
	require.NoError(t, err, out)
	var fs meshapi.FreezesResult
	require.NoError(t, json.Unmarshal([]byte(out), &fs), out)
	require.Len(t, fs.Freezes, 1, "the other module's freeze stays")
	require.Equal(t, "mesh-controller", fs.Freezes[0].Module)
}

// A deny window in the config (issue 14), a few seconds long and open when
// the worker starts: a merge started inside it holds before its first tier,
// says when the window closes, sends nothing, and goes on by itself on its
// durable timer when it closes. The test waits on the plan's state, never
// on a sleep.
func TestDenyWindowHoldsAMergeUntilItCloses(t *testing.T) {
	t.Parallel()
	o := exampleMesh()
	var closes time.Time
	o.windows = func() string {
		// cron has minute resolution: the window starts at this minute
		// and lasts until a few seconds from now.
		now := time.Now().UTC()
		start := now.Truncate(time.Minute)
		closes = now.Add(8 * time.Second)
		return fmt.Sprintf(`[{deny: "%d %d * * *", duration: %s, time_zone: UTC, reason: "test window"}]`,
			start.Minute(), start.Hour(), closes.Sub(start).Round(time.Millisecond))
	}
	s := newStack(t, o)
	h := s.commit("host")
	id := s.start("host", h).ID
	st := waitFor(t, s, id, meshapi.PlanHeld)
	require.Contains(t, st.Reason, "held: outside window, opens at ")
	require.Contains(t, st.Reason, "test window")
	for m, host := range s.hosts {
		require.Empty(t, host.Applied(), "nothing sent to %s inside the deny window", m)
	}
	show, err := s.starter("plan", "show", id)
	require.NoError(t, err, show)
	require.Contains(t, show, "held: outside window, opens at ")
	require.Contains(t, show, "\nno command lifts a deployment window: the plan goes on by itself when it opens\n")

	st = s.wait(id)
	require.Equal(t, meshapi.PlanConverged, st.State, st.Reason)
	require.False(t, time.Now().Before(closes), "converged before the window closed")
	for m := range s.hosts {
		s.runs(m, s.build("host", h))
	}
}

// A merge started with --override-freeze passes a freeze of the whole mesh,
// and every host journals who overrode it and why; another merge, without
// it, holds.
func TestOverrideFreezePassesAndIsJournalled(t *testing.T) {
	t.Parallel()
	s := newStack(t, exampleMesh())
	_, err := s.starter("freeze", "--reason", "release week", "--by", "alice")
	require.NoError(t, err)
	h := s.commit("host")
	out, err := s.starter("merge", "--module", "host", "--commit", h, "--override-freeze", "--reason", "hotfix for incident 42",
		"--by", "bob", "--wait", "--output", "json")
	require.NoError(t, err, out)
	var res struct {
		State meshapi.PlanStatus `json:"state"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Equal(t, meshapi.PlanConverged, res.State, out)
	for m, host := range s.hosts {
		var said []string
		for _, e := range host.journal() {
			if e.Plan == meshapi.PlanID("host", h) && e.Reason != "" {
				said = append(said, e.Reason)
			}
		}
		require.Contains(t, said, "override freeze by "+asked("bob")+": hotfix for incident 42", "%s journal", m)
		s.checkJournal(m)
	}

	held := s.start("host", s.commit("host")).ID
	st := waitFor(t, s, held, meshapi.PlanHeld)
	require.Equal(t, "held: freeze by "+asked("alice")+": release week", st.Reason)
}

package testsuite

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/machines"
)

// status reads the hosts from the fleet picture the worker keeps, and the
// machine workflows from the feed of them it keeps beside it: after a
// push it shows the new digest, each machine heard a moment ago; and an
// agent that stops turns unreachable in the picture's words (since when,
// last heard when) — words status only has from the picture, since asking
// the stopped host itself would say "connection refused" of its URL.
func TestStatusReadsTheFleetPicture(t *testing.T) {
	t.Parallel()
	o := exampleMesh()
	o.picture = true
	s := newStack(t, o)
	h1 := s.commit("host")
	s.converge("host", h1)
	digest := s.digestOf("host", h1)

	var st statusJSON
	eventually(t, 30*time.Second, "status to show edge-1 running the new build from the picture, and every machine workflow's last push from the worker's feed", func() bool {
		st, _ = s.status()
		r := st.byKey()["edge-1/host"]
		if r.Digest != digest || r.HostError != "" || st.WorkflowsFedAt == nil {
			return false
		}
		for _, m := range st.Machines {
			if m.LastSeq == nil || *m.LastSeq != s.hosts[m.Machine].Report().LastSeq {
				return false
			}
		}
		return true
	})
	require.Equal(t, machines.HostsFromPicture, st.HostsFrom)
	for _, m := range st.Machines {
		assert.Equal(t, machines.HostOK, m.HostStatus, m.Machine)
		assert.Regexp(t, `^heard \d+s ago$`, m.HostFreshness, m.Machine)
	}

	edge := s.hosts["edge-1"]
	url := edge.URL()
	// Down first, so that a long poll the client retries on a new
	// connection is refused at once rather than held open by the agent.
	edge.SetDown(true)
	edge.srv.CloseClientConnections()
	edge.srv.Close()
	eventually(t, 30*time.Second, "status to show edge-1 unreachable", func() bool {
		st, _ = s.status()
		return st.byKey()["edge-1/host"].HostError != ""
	})
	var row = st.Machines[0]
	for _, m := range st.Machines {
		if m.Machine == "edge-1" {
			row = m
		}
	}
	require.Equal(t, "edge-1", row.Machine)
	assert.Equal(t, machines.HostUnreachable, row.HostStatus)
	assert.True(t, strings.HasPrefix(row.HostError, "unreachable since "), "the picture's words, not the host's: %s", row.HostError)
	assert.Contains(t, row.HostError, "last heard at ")
	assert.Contains(t, row.HostError, url, "the watcher's error names the host")
	assert.Regexp(t, `^heard \d+s ago$`, row.HostFreshness)
	assert.Empty(t, st.byKey()["control-node/host"].HostError, "the other host is still read")
}

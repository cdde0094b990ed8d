package machines

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/fleetwatch"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// countedHost serves rep and counts the reports it was asked for, so that
// a test can tell a row read from the picture from one read from its host.
func countedHost(t *testing.T, rep mesh.Report) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == host.PathReport {
			n.Add(1)
			writeJSON(w, rep)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

func TestReadStatusFromThePicture(t *testing.T) {
	now := time.Now().UTC()
	rep := func(m string, gen int64) *mesh.Report {
		return &mesh.Report{Machine: m, LastSeq: 1, Containers: []mesh.RunningContainer{healthy("host", gen, meshapi.PlanID("host", commitA), 1)}}
	}
	since := now.Add(-90 * time.Second)
	pic := []catalogue.HostState{
		{Machine: "fresh", Report: rep("fresh", 5), HeardAt: now.Add(-3 * time.Second)},
		{Machine: "failing", Report: rep("failing", 9), HeardAt: since.Add(-time.Second), Error: "connection refused", ErrorSince: &since},
		{Machine: "silent", Report: rep("silent", 9), HeardAt: now.Add(-fleetwatch.StaleAfter - time.Minute)},
	}
	url, asked := countedHost(t, *rep("new", 4))
	cfg := &config.Config{Machines: map[string]config.Machine{}}
	for _, m := range []string{"fresh", "failing", "silent", "new"} {
		cfg.Machines[m] = config.Machine{Host: url, Tier: 1, Modules: []string{"host"}}
	}
	read := func(context.Context) ([]catalogue.HostState, error) { return pic, nil }

	st, err := ReadStatus(t.Context(), cfg, Sources{Dial: noTemporal, Hosts: read}, StatusFilter{})
	require.ErrorIs(t, err, errTemporal)
	assert.Zero(t, asked.Load(), "the fleet's status asks no host")
	assert.Equal(t, HostsFromPicture, st.HostsFrom)
	assert.Equal(t, map[string]int64{"host": 5}, st.NewestHealthy, "only hosts heard lately count")
	byName := map[string]Row{}
	for _, m := range st.Machines {
		byName[m.Machine] = m
	}
	for _, tc := range []struct {
		machine, status, freshness string
		errHas                     []string
	}{
		{"fresh", HostOK, "heard 3s ago", nil},
		{"failing", HostUnreachable, "heard 1m31s ago", []string{"unreachable since " + clock(since), "(1m30s ago)", "last heard at", "connection refused"}},
		{"silent", HostStale, "heard 2m55s ago", []string{"silent: last heard at", "is the worker running?"}},
		{"new", HostUnknown, "-", []string{"not in the fleet picture yet", "is the worker running?"}},
	} {
		r := byName[tc.machine]
		assert.Equal(t, tc.status, r.HostStatus, tc.machine)
		assert.Equal(t, tc.freshness, r.HostFreshness, tc.machine)
		for _, s := range tc.errHas {
			assert.Contains(t, r.HostError, s, tc.machine)
		}
		if tc.errHas == nil {
			assert.Empty(t, r.HostError, tc.machine)
		}
	}

	// One machine the picture lacks: its host is asked, and only it.
	st, _ = ReadStatus(t.Context(), cfg, Sources{Dial: noTemporal, Hosts: read}, StatusFilter{Machine: "new"})
	assert.Equal(t, int64(1), asked.Load())
	require.Len(t, st.Machines, 1)
	assert.Equal(t, HostOK, st.Machines[0].HostStatus)
	assert.Equal(t, "asked now", st.Machines[0].HostFreshness)

	// A picture that cannot be read: every host unknown, none asked.
	broken := func(context.Context) ([]catalogue.HostState, error) { return nil, errors.New("database is locked") }
	rows, _ := List(t.Context(), cfg, Sources{Dial: noTemporal, Hosts: broken})
	assert.Equal(t, int64(1), asked.Load())
	for _, r := range rows {
		assert.Equal(t, HostUnknown, r.HostStatus, r.Machine)
		assert.Contains(t, r.HostError, "the fleet picture could not be read: database is locked", r.Machine)
	}
}

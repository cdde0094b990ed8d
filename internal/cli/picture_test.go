package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/meshroll/meshroll/internal/catalogue/sqlcat"
	"github.com/meshroll/meshroll/internal/fleetwatch"
	"github.com/meshroll/meshroll/internal/mesh"
)

// Status and machine list read the hosts from the worker's catalogue when
// there is one beside the config: every row says how long ago its host was
// heard, a silent host is stale in words, and no host is asked (both hosts
// here are unreachable, so a row that asked one would say so).
func TestStatusReadsTheFleetPicture(t *testing.T) {
	cfg := configWithHosts(t, "http://127.0.0.1:1", "http://127.0.0.1:1")
	cat, err := sqlcat.Open(context.Background(), "sqlite:"+filepath.Join(filepath.Dir(cfg), ".meshroll", "catalogue.db"))
	require.NoError(t, err)
	now := time.Now()
	rep := mesh.Report{Machine: "edge-1", LastSeq: 4, Containers: []mesh.RunningContainer{
		{Module: "host", Digest: "sha256:" + strings.Repeat("a", 64), Generation: 3, State: mesh.StateRunning, Health: mesh.HealthHealthy, Seq: 4},
	}}
	_, err = cat.RecordHostReport(t.Context(), "edge-1", rep, 7, now.Add(-2*time.Second))
	require.NoError(t, err)
	_, err = cat.RecordHostReport(t.Context(), "control-node", mesh.Report{Machine: "control-node"}, 7, now.Add(-fleetwatch.StaleAfter-time.Minute))
	require.NoError(t, err)
	require.NoError(t, cat.Close())

	r := run(t, "--config", cfg, "status")
	require.Error(t, r.err, "Temporal is unreachable")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	assert.Regexp(t, `^MACHINE\s+TIER\s+MODULE\s+GEN\s+.*FROZEN\s+HEARD$`, lines[0])
	assert.Regexp(t, `^edge-1\s+1\s+host\s+3\s+.*\s+[23]s ago$`, lines[1], r.stdout)
	assert.Regexp(t, `^control-node\s+2\s+host(\s+\?){9}\s+2m5[56]s ago$`, lines[2], r.stdout)
	assert.Regexp(t, `(?m)^control-node: silent: last heard at .+ longer than the 1m55s a watched host goes between answers; the host hangs, or no worker is watching it \(is the worker running\?\)$`, r.stdout)
	assert.NotContains(t, r.stdout, "/v1/report", "no host was asked")
	assert.NotContains(t, r.stdout, "asked directly")

	r = run(t, "--config", cfg, "machine", "list")
	require.Error(t, r.err)
	assert.Regexp(t, `(?m)^edge-1\s+1\s+host\s+\S+\s+\?\s+\?\s+ok, heard [23]s ago$`, r.stdout)
	assert.Regexp(t, `(?m)^control-node\s+2\s+\S+\s+\S+\s+\?\s+\?\s+stale, heard 2m5[56]s ago$`, r.stdout)
}

// Package machines is the starter's client for a mesh's machines, as
// package plans is for its plans: what the mesh config says of each machine,
// what its host reports running and was told (its journal), and what its
// machine workflow is pushing and has queued. Each source is read at once
// and on its own, within its own deadline, so that a dead host or an
// unreachable Temporal still leaves the others' answers; the results say
// in their *_error fields what could not be read, so that the starter only
// renders them.
package machines

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// QueryTimeout bounds a machine workflow's state query. A query needs a
// worker to answer it; with none polling it would wait for the caller's
// whole deadline. It is generous because a worker answers by replaying the
// workflow's history, which on a loaded worker, or one just restarted (its
// cache cold), takes seconds; 5 s was seen to time out under load.
const QueryTimeout = 15 * time.Second

// Dial connects to Temporal. List and Show take it rather than a client so
// that the hosts are asked while it connects: an unreachable Temporal then
// costs no host its answer, and no time.
type Dial func(context.Context) (client.Client, error)

// Sources are where List and ReadStatus read a machine's parts.
type Sources struct {
	// Dial connects to Temporal for the machine workflows.
	Dial Dial
	// Hosts is the fleet picture of the hosts; nil: every host is asked
	// directly.
	Hosts Picture
	// Workflows, when set and current, gives the machine workflows'
	// summaries in place of a visibility list of every one (the worker's
	// package machinefeed).
	Workflows Feed
}

// Feed is a current picture of every machine workflow's summary, as of
// asOf; ok is false when it has none, or none recent enough to show.
type Feed interface {
	Summaries(ctx context.Context) (sums plans.Summaries, asOf time.Time, ok bool)
}

// hostClient is the machine's host API client, its errors naming the host.
func hostClient(m config.Machine) (*host.HTTPClient, error) {
	c, err := m.HostClient()
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", m.Host, err)
	}
	return c, nil
}

// machineState is plans.MachineState bounded by QueryTimeout.
func machineState(ctx context.Context, c client.Client, machine string) (meshapi.MachineState, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	return plans.MachineState(ctx, c, machine)
}

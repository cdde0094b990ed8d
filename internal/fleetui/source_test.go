package fleetui

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/machines"
)

// downTemporal is a client whose frontend does not answer, counting the
// state queries it is asked.
type downTemporal struct {
	client.Client
	queries int
}

var errUnavailable = errors.New("connection refused")

func (*downTemporal) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return nil, errUnavailable
}

func (d *downTemporal) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	d.queries++
	return nil, errUnavailable
}

// An unreachable Temporal is one error, Temporal's, and no machine
// workflow is asked; the hosts are still read.
func TestReaderSaysTemporalIsUnreachable(t *testing.T) {
	c := cfg("edge-1:1:host")
	c.Temporal.Address = "127.0.0.1:7233"
	tc := &downTemporal{}
	r := Reader{Config: c, Client: tc, Catalogue: catalogue.NewMemory()}
	st, err := r.Status(context.Background())
	require.Error(t, err)
	assert.ErrorIs(t, err, errUnavailable)
	assert.Contains(t, err.Error(), "temporal 127.0.0.1:7233 unreachable")
	assert.Zero(t, tc.queries, "no machine workflow is asked of a Temporal that is down")
	require.Len(t, st.Machines, 1)
	assert.Equal(t, machines.HostUnknown, st.Machines[0].HostStatus, "the hosts are read from the picture all the same (empty here)")

	d, err := r.Machine(context.Background(), "edge-1")
	require.Error(t, err)
	assert.Contains(t, d.WorkflowError, "temporal 127.0.0.1:7233 unreachable")
	_, err = r.Machine(context.Background(), "edge-9")
	assert.ErrorIs(t, err, errUnknownMachine)
}

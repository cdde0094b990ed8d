package plans

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// ErrNoMachineWorkflow is returned for a machine whose workflow was never
// started: machine workflows start on a plan's first push to them, so a
// machine no plan has pushed yet has none, and that is not a failure.
var ErrNoMachineWorkflow = errors.New("no machine workflow")

// MachineState asks a machine's workflow for its state: the last sequence
// it sent, the request it is pushing and its queue.
func MachineState(ctx context.Context, c client.Client, machine string) (meshapi.MachineState, error) {
	id := meshapi.MachineID(machine)
	v, err := queryState(ctx, c, id)
	if err != nil {
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return meshapi.MachineState{}, fmt.Errorf("%w %s", ErrNoMachineWorkflow, id)
		}
		return meshapi.MachineState{}, fmt.Errorf("query machine workflow %s: %w", id, err)
	}
	var st meshapi.MachineState
	if err := v.Get(&st); err != nil {
		return meshapi.MachineState{}, fmt.Errorf("decode state of machine workflow %s: %w", id, err)
	}
	if st.Queue == nil {
		st.Queue = []meshapi.QueuedRequest{}
	}
	return st, nil
}

package machines

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// HostCheckTimeout bounds each host's report in List: the list is an
// overview, and one dead host must not hold up the rest of it.
const HostCheckTimeout = 2 * time.Second

// Row is one machine of List.
type Row struct {
	Machine string   `json:"machine"`
	Tier    int      `json:"tier"`
	Modules []string `json:"modules"`
	Host    string   `json:"host"`
	// LastSeq and Queue are the machine workflow's; null when it has no
	// workflow yet or it could not be asked (WorkflowError says why).
	LastSeq *uint64 `json:"last_seq"`
	Queue   *int    `json:"queue"`
	// Current is the request being pushed now, if any.
	Current       *meshapi.QueuedRequest `json:"current,omitempty"`
	WorkflowError string                 `json:"workflow_error,omitempty"`
	HostStatus    string                 `json:"host_status"`
	// HostSeq is the last sequence the host reports it applied.
	HostSeq   *uint64 `json:"host_seq"`
	HostError string  `json:"host_error,omitempty"`
}

// Host statuses of a Row.
const (
	HostOK          = "ok"
	HostUnreachable = "unreachable"
	// HostError is a host that answered but not with a report (a refused
	// token, a malformed answer, a bad ca_file).
	HostError = "error"
)

// List asks every host and machine workflow of cfg at once, one row a
// machine in cfg's order. Only Temporal being unreachable is an error, and
// the rows still hold what the hosts said; everything else is in the rows.
func List(ctx context.Context, cfg *config.Config, dial Dial) ([]Row, error) {
	names := cfg.MachineNames()
	rows := make([]Row, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		m := cfg.Machines[name]
		rows[i] = Row{Machine: name, Tier: m.Tier, Modules: m.Modules, Host: m.Host}
		if rows[i].Modules == nil {
			rows[i].Modules = []string{}
		}
		r := &rows[i]
		wg.Go(func() {
			hctx, cancel := context.WithTimeout(ctx, HostCheckTimeout)
			defer cancel()
			rep, err := hostReport(hctx, m)
			switch {
			case err == nil:
				r.HostStatus, r.HostSeq = HostOK, &rep.LastSeq
			case host.IsUnreachable(err) || errors.Is(err, context.DeadlineExceeded):
				r.HostStatus, r.HostError = HostUnreachable, err.Error()
			default:
				r.HostStatus, r.HostError = HostError, err.Error()
			}
		})
	}
	c, derr := dial(ctx)
	if derr == nil {
		defer c.Close()
		for i := range rows {
			r := &rows[i]
			wg.Go(func() {
				st, err := machineState(ctx, c, r.Machine)
				switch {
				case err == nil:
					q := len(st.Queue)
					r.LastSeq, r.Queue, r.Current = &st.LastSeq, &q, st.Current
				case !errors.Is(err, plans.ErrNoMachineWorkflow):
					r.WorkflowError = err.Error()
				}
			})
		}
	} else {
		for i := range rows {
			rows[i].WorkflowError = derr.Error()
		}
	}
	wg.Wait()
	return rows, derr
}

func hostReport(ctx context.Context, m config.Machine) (mesh.Report, error) {
	c, err := hostClient(m)
	if err != nil {
		return mesh.Report{}, err
	}
	return c.Report(ctx)
}

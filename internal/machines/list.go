package machines

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// HostCheckTimeout bounds each host's report in List and Status when they
// ask a host directly (no fleet picture, or one machine the picture lacks):
// they are overviews, and one dead host must not hold up the rest.
const HostCheckTimeout = 2 * time.Second

// Row is one machine of List, and of Status.Machines: a machine's host
// and workflow, as "machine list" and "status" both show them.
type Row struct {
	Machine string `json:"machine"`
	Tier    int    `json:"tier"`
	// Labels are the machine's labels from the mesh config, which
	// tiers' select and --selector match on.
	Labels  map[string]string `json:"labels,omitempty"`
	Modules []string          `json:"modules"`
	Host    string            `json:"host"`
	// LastSeq and Queue are the machine workflow's; null when it has no
	// workflow yet or it could not be asked (WorkflowError says why).
	LastSeq *uint64 `json:"last_seq"`
	Queue   *int    `json:"queue"`
	// Current is the request being pushed now, if any.
	Current *meshapi.QueuedRequest `json:"current,omitempty"`
	// Rollbacks counts the queued requests that restore a known-good
	// build: they are first in line, before the merge pushes.
	Rollbacks     int    `json:"queued_rollbacks,omitempty"`
	WorkflowError string `json:"workflow_error,omitempty"`
	HostStatus    string `json:"host_status"`
	// HostSeq is the last sequence the host reports it applied.
	HostSeq   *uint64 `json:"host_seq"`
	HostError string  `json:"host_error,omitempty"`
	// HostHeardAt is when the worker last heard the host, from the fleet
	// picture; HostErrorSince is since when it has failed or been silent.
	HostHeardAt    *time.Time `json:"host_heard_at,omitempty"`
	HostErrorSince *time.Time `json:"host_error_since,omitempty"`
	// HostFreshness words how old the host part is: "heard 3s ago" from
	// the picture, "asked now" when the host was read directly.
	HostFreshness string `json:"host_freshness"`
}

// Host statuses of a Row.
const (
	HostOK          = "ok"
	HostUnreachable = "unreachable"
	// HostUnauthorized is a host that turned the machine's token away (401
	// or 403): HostError names the setting that gives it.
	HostUnauthorized = "unauthorized"
	// HostError is a host that answered but not with a report (a malformed
	// answer, a bad ca_file).
	HostError = "error"
)

// List reads every host of cfg from src.Hosts (every host directly when it
// is nil) and asks every machine workflow, one row a machine in cfg's order.
// Only Temporal being unreachable is an error, and the rows still hold
// what the hosts said; everything else is in the rows.
func List(ctx context.Context, cfg *config.Config, src Sources) ([]Row, error) {
	rs, _, err := readAll(ctx, cfg, cfg.MachineNames(), nil, src, nil)
	rows := make([]Row, len(rs))
	for i, r := range rs {
		rows[i] = r.row()
	}
	return rows, err
}

// reading is what one machine's host and its machine workflow said, each
// read on its own: List and Status word the same readings their own way.
type reading struct {
	name string
	m    config.Machine
	rep  mesh.Report
	// hostErr is why rep could not be read.
	hostErr error
	// status is the host's status when the picture judged it; "" to
	// judge it from hostErr.
	status string
	// heard is when the picture last heard the host, errSince since when
	// it failed or went silent; direct is a host read directly.
	heard, errSince *time.Time
	direct          bool
	now             time.Time
	// asked is whether the workflow was asked; state is nil when it was
	// not, when the machine has no workflow yet (no plan has pushed it),
	// or when it could not be asked (wfErr).
	asked bool
	state *meshapi.MachineSummary
	wfErr error
}

// summaries reads the machine workflows of more than one asked machine
// (asked counts them) from feed while it is current, else from one
// visibility list (plans.MachineSummaries) rather than a query each, which
// at thousands of machines takes tens of seconds and a worker to answer
// every one. One machine is asked directly, current to the moment; so is
// each machine whose workflow has published no summary yet, and every
// machine when the list fails (listErr), up to AskOneByOne of them.
// listed is whether sums holds the summaries; fedAt is when feed read them
// (nil: they were listed now).
func summaries(ctx context.Context, c client.Client, cfg *config.Config, feed Feed, asked int, derr error) (sums plans.Summaries, listed bool, fedAt *time.Time, listErr error) {
	if derr != nil || asked <= 1 {
		return sums, false, nil, nil
	}
	if feed != nil {
		if sums, at, ok := feed.Summaries(ctx); ok {
			return sums, true, &at, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	sums, err := plans.MachineSummaries(ctx, c, cfg.Temporal.Namespace, cfg.Temporal.TaskQueue)
	return sums, err == nil, nil, err
}

// AskOneByOne is the most machine workflows a read asks one query each
// when their list failed. Past it each machine's row says the list failed
// instead: a server that could not answer one list would not answer
// thousands of queries at once either, and they would only add to its load.
const AskOneByOne = 100

// notAsked is every machine's workflow error when their list failed and
// there are more than AskOneByOne of them; nil when they are to be asked.
func notAsked(listErr error, asked int) error {
	if listErr == nil || asked <= AskOneByOne {
		return nil
	}
	return fmt.Errorf("%w; not asked one by one (%d machines, more than %d): read again, or ask one with `starter machine show NAME`", listErr, asked, AskOneByOne)
}

// CommonWorkflowError is the error every one of several machines' workflows
// failed with, as all do when Temporal cannot be reached or their list
// failed, for a reader to say it once; "" when they differ.
func CommonWorkflowError(ms []Row) string {
	if len(ms) < 2 {
		return ""
	}
	for _, m := range ms[1:] {
		if m.WorkflowError != ms[0].WorkflowError {
			return ""
		}
	}
	return ms[0].WorkflowError
}

// readAll reads the hosts of names from src.Hosts in one read, and the
// machine workflows of those of them askWorkflow picks (nil: all), all at
// once, dialling Temporal meanwhile. A host the picture has nothing of (or
// every host, when it cannot be read) is asked directly, within
// HostCheckTimeout, only when direct picks it: one machine, never the
// fleet. With no picture every host is asked directly. fedAt is when
// src.Workflows read the machine workflows, if it did. The error is the
// dial's alone, and then every asked reading's wfErr is it too: the hosts'
// answers are kept either way.
func readAll(ctx context.Context, cfg *config.Config, names []string, askWorkflow func(string) bool, src Sources, direct func(string) bool) (rs []reading, fedAt *time.Time, derr error) {
	now := time.Now().UTC()
	pic := src.Hosts
	var states map[string]catalogue.HostState
	var picErr error
	if pic != nil {
		hs, err := pic(ctx)
		if err != nil {
			picErr = fmt.Errorf("the fleet picture could not be read: %w", err)
		}
		states = make(map[string]catalogue.HostState, len(hs))
		for _, h := range hs {
			states[h.Machine] = h
		}
	}
	rs = make([]reading, len(names))
	asked := 0
	var wg sync.WaitGroup
	for i, name := range names {
		r := &rs[i]
		r.name, r.m, r.now = name, cfg.Machines[name], now
		r.asked = askWorkflow == nil || askWorkflow(name)
		if r.asked {
			asked++
		}
		if pic != nil {
			h, ok := states[name]
			switch {
			case ok && picErr == nil:
				r.pictured(h, now)
				continue
			case direct == nil || !direct(name):
				r.hostErr, r.status = cmp.Or(picErr, errNoEntry), HostUnknown
				continue
			}
		}
		r.direct = true
		wg.Go(func() {
			hctx, cancel := context.WithTimeout(ctx, HostCheckTimeout)
			defer cancel()
			r.rep, r.hostErr = hostReport(hctx, r.m)
		})
	}
	c, derr := src.Dial(ctx)
	if derr == nil {
		defer c.Close()
	}
	sums, listed, fedAt, listErr := summaries(ctx, c, cfg, src.Workflows, asked, derr)
	unasked := notAsked(listErr, asked)
	for i := range rs {
		r := &rs[i]
		switch {
		case !r.asked:
		case derr != nil:
			r.wfErr = derr
		case unasked != nil:
			r.wfErr = unasked
		case listed && !sums.Unpublished[r.name]:
			if s, ok := sums.ByMachine[r.name]; ok {
				r.state = &s
			}
		default:
			wg.Go(func() {
				st, err := machineState(ctx, c, r.name)
				switch {
				case err == nil:
					s := st.Summary()
					r.state = &s
				case !errors.Is(err, plans.ErrNoMachineWorkflow):
					r.wfErr = err
				}
			})
		}
	}
	wg.Wait()
	return rs, fedAt, derr
}

// row is the reading as List words it.
func (r reading) row() Row {
	row := Row{Machine: r.name, Tier: r.m.Tier, Labels: r.m.Labels, Modules: r.m.Modules, Host: r.m.Host}
	if row.Modules == nil {
		row.Modules = []string{}
	}
	row.HostHeardAt, row.HostErrorSince = r.heard, r.errSince
	row.HostFreshness = freshness(r.heard, r.now, r.direct)
	switch err := r.hostErr; {
	case r.status != "":
		row.HostStatus, row.HostError = r.status, err.Error()
	case err == nil:
		seq := r.rep.LastSeq
		row.HostStatus, row.HostSeq = HostOK, &seq
	case host.IsUnreachable(err) || errors.Is(err, context.DeadlineExceeded):
		row.HostStatus, row.HostError = HostUnreachable, err.Error()
	default:
		if msg, ok := r.m.TokenProblem(r.name, err); ok {
			row.HostStatus, row.HostError = HostUnauthorized, msg
			break
		}
		row.HostStatus, row.HostError = HostError, err.Error()
	}
	if r.wfErr != nil {
		row.WorkflowError = r.wfErr.Error()
	}
	if st := r.state; st != nil {
		seq, q := st.LastSeq, st.Queue
		row.LastSeq, row.Queue, row.Current, row.Rollbacks = &seq, &q, st.Current, st.Rollbacks
	}
	return row
}

func hostReport(ctx context.Context, m config.Machine) (mesh.Report, error) {
	c, err := hostClient(m)
	if err != nil {
		return mesh.Report{}, err
	}
	return c.Report(ctx)
}

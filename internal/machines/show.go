package machines

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// HostTimeout bounds the host calls of Show, which is asked about one
// machine and can wait a little longer for it than List.
const HostTimeout = 5 * time.Second

// journalPage bounds one journal request; agents accept up to 500.
const journalPage = 100

// Detail is one machine as Show reads it. Each part is filled independently,
// so that a dead host still shows the workflow's side and the reverse; the
// *_error fields say what could not be read.
type Detail struct {
	Machine string `json:"machine"`
	Host    string `json:"host"`
	Tier    int    `json:"tier"`
	// Labels are the machine's labels in the mesh config, what tier
	// selectors and group_by read.
	Labels  map[string]string `json:"labels,omitempty"`
	Modules []string          `json:"modules"`
	// Seq is the last sequence the host reports it applied; null when the
	// host could not be read.
	Seq *uint64 `json:"seq"`
	// LastPlan is the plan of that last declaration, as the host's
	// containers name it; empty when it declared none.
	LastPlan string `json:"last_plan,omitempty"`
	// ReportedMachine is the machine the host says it is, when that is not
	// Machine: the config points at the wrong host.
	ReportedMachine string      `json:"reported_machine,omitempty"`
	Containers      []Container `json:"containers"`
	HostError       string      `json:"host_error,omitempty"`
	// Workflow is null when the machine has no workflow yet (no plan has
	// pushed it) or it could not be asked (WorkflowError).
	Workflow      *Workflow      `json:"workflow"`
	WorkflowError string         `json:"workflow_error,omitempty"`
	Journal       []JournalEntry `json:"journal"`
	JournalError  string         `json:"journal_error,omitempty"`
}

// Container is a container as the host reports it, without the settings
// (args, env) it runs with: those may hold secrets, and a person asking
// what runs wants the build.
type Container struct {
	Module     string `json:"module"`
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
	Commit     string `json:"commit,omitempty"`
	// Plan and Seq are the last declaration, which names every container
	// of the machine (Detail.LastPlan).
	Plan string `json:"plan"`
	Seq  uint64 `json:"seq"`
	// Introduced is the declaration that put this digest here: the plan
	// that brought the build. Absent when the host does not say (an agent
	// from before it did).
	Introduced *mesh.Introduction `json:"introduced,omitempty"`
	State      string             `json:"state"`
	Since      string             `json:"since,omitempty"`
}

// Workflow is the machine workflow's side: what it last sent, what it is
// pushing and what waits behind it.
type Workflow struct {
	ID      string                  `json:"id"`
	LastSeq uint64                  `json:"last_seq"`
	Current *meshapi.QueuedRequest  `json:"current"`
	Queue   []meshapi.QueuedRequest `json:"queue"`
	// Floor is the workflow's own record of the newest build of each
	// module that ran healthy here, by module: what a push will not go
	// below, whatever the host reports.
	Floor []Floor `json:"floor"`
	// HostLostState says when a push last found the host had lost its
	// state; empty when none has.
	HostLostState string `json:"host_lost_state,omitempty"`
	// BudgetWait, when set, says the push of Current waits for a place in
	// the fleet budget (push.max_unavailable), and behind whom.
	BudgetWait string `json:"budget_wait,omitempty"`
}

// Floor is one module's floor on a machine.
type Floor struct {
	Module     string `json:"module"`
	Generation int64  `json:"generation"`
	Digest     string `json:"digest"`
	Commit     string `json:"commit,omitempty"`
}

// floors lists a machine workflow's floor record by module.
func floors(f map[string]mesh.Container) []Floor {
	out := []Floor{}
	for _, m := range slices.Sorted(maps.Keys(f)) {
		c := f[m]
		out = append(out, Floor{Module: m, Generation: c.Generation, Digest: c.Digest, Commit: c.Commit})
	}
	return out
}

// JournalEntry is a host journal entry with the containers cut to what
// says which build was meant.
type JournalEntry struct {
	Index      uint64    `json:"index"`
	Time       time.Time `json:"time"`
	Outcome    string    `json:"outcome"`
	Seq        uint64    `json:"seq"`
	Plan       string    `json:"plan"`
	Request    string    `json:"request,omitempty"`
	Force      bool      `json:"force"`
	ForcedPast string    `json:"forced_past,omitempty"`
	Code       string    `json:"code,omitempty"`
	Message    string    `json:"message,omitempty"`
	// Revert marks a declaration that put the machine back after its
	// plan's build failed; Reason says how it failed (or, on the first
	// declaration to a host that lost its state, that it had).
	Revert bool `json:"revert,omitempty"`
	// Rollback marks an operator's rollback, the one declaration that may
	// go below the floor; Reason says who asked and why.
	Rollback   bool               `json:"rollback,omitempty"`
	Reason     string             `json:"reason,omitempty"`
	Containers []JournalContainer `json:"containers"`
}

// JournalContainer is a journalled container's build, without its
// settings.
type JournalContainer struct {
	Module     string `json:"module"`
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
}

// Show reads machine name (m in the mesh config) from its host (the report
// and, when entries > 0, the latest entries of its journal) and from its
// machine workflow, all at once. The error names, for an operator, every
// part that could not be read; the Detail holds the rest. A machine no plan
// has pushed yet has no workflow, and that is not an error.
func Show(ctx context.Context, dial Dial, name string, m config.Machine, entries int) (Detail, error) {
	d := Detail{Machine: name, Host: m.Host, Tier: m.Tier, Labels: m.Labels, Modules: m.Modules, Containers: []Container{}, Journal: []JournalEntry{}}
	if d.Modules == nil {
		d.Modules = []string{}
	}
	var hostErr, journalErr, wfErr error
	var wg sync.WaitGroup
	hc, cerr := hostClient(m)
	if cerr != nil {
		hostErr = cerr
	} else {
		wg.Go(func() {
			hctx, cancel := context.WithTimeout(ctx, HostTimeout)
			defer cancel()
			rep, err := hc.Report(hctx)
			if err != nil {
				hostErr = err
				return
			}
			d.Seq = &rep.LastSeq
			if rep.Machine != "" && rep.Machine != name {
				d.ReportedMachine = rep.Machine
			}
			for _, c := range rep.Containers {
				d.Containers = append(d.Containers, Container{
					Module: c.Module, Digest: c.Digest, Generation: c.Generation, Commit: c.Commit,
					Plan: c.Plan, Seq: c.Seq, Introduced: c.Introduced, State: c.State, Since: c.Since,
				})
				if c.Seq == rep.LastSeq {
					d.LastPlan = c.Plan
				}
			}
		})
		if entries > 0 {
			wg.Go(func() {
				hctx, cancel := context.WithTimeout(ctx, HostTimeout)
				defer cancel()
				es, err := journal(hctx, hc, entries)
				if err != nil {
					journalErr = err
				}
				d.Journal = es
			})
		}
	}
	wg.Go(func() {
		c, err := dial(ctx)
		if err != nil {
			wfErr = err
			return
		}
		defer c.Close()
		st, err := machineState(ctx, c, name)
		switch {
		case errors.Is(err, plans.ErrNoMachineWorkflow):
		case err != nil:
			wfErr = err
		default:
			d.Workflow = &Workflow{ID: meshapi.MachineID(name), LastSeq: st.LastSeq, Current: st.Current, Queue: st.Queue,
				Floor: floors(st.Floor), HostLostState: st.HostLostState, BudgetWait: st.BudgetWait}
		}
	})
	wg.Wait()

	var msgs []string
	var errs []error
	if hostErr != nil {
		d.HostError = hostProblem(name, m, hostErr)
		msgs, errs = append(msgs, d.HostError), append(errs, hostErr)
	}
	// A journal that fails the way the report did says nothing new.
	if journalErr != nil {
		d.JournalError = "journal: " + hostProblem(name, m, journalErr)
		if hostErr == nil {
			msgs, errs = append(msgs, d.JournalError), append(errs, journalErr)
		}
	}
	if wfErr != nil {
		d.WorkflowError = wfErr.Error()
		msgs, errs = append(msgs, d.WorkflowError), append(errs, wfErr)
	}
	if len(errs) == 0 {
		return d, nil
	}
	return d, &partsError{msg: "machine " + name + ": " + strings.Join(msgs, "; "), errs: errs}
}

// partsError is Show's error: the parts that could not be read, worded for
// an operator, with every cause kept for errors.Is and errors.As.
type partsError struct {
	msg  string
	errs []error
}

func (e *partsError) Error() string   { return e.msg }
func (e *partsError) Unwrap() []error { return e.errs }

// hostProblem words machine name's host error for the operator: "host
// <url> unreachable: <cause>" when it did not answer, the setting to fix
// when it turned the token away, the error as it is (it names the host)
// otherwise.
func hostProblem(name string, m config.Machine, err error) string {
	var u *host.UnreachableError
	if errors.As(err, &u) {
		return fmt.Sprintf("host %s unreachable: %v", u.URL, u.Err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("host %s unreachable: %v", m.Host, err)
	}
	if msg, ok := m.TokenProblem(name, err); ok {
		return msg
	}
	return err.Error()
}

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/plans"
)

// HostCheckTimeout bounds each host's report in "machine list": the list
// is an overview, and one dead host must not hold up the rest of it.
const HostCheckTimeout = 2 * time.Second

// HostTimeout bounds the host calls of "machine show", which is asked
// about one machine and can wait a little longer for it.
const HostTimeout = 5 * time.Second

// QueryTimeout bounds a machine workflow's state query. A query needs a
// worker to answer it; with none polling it would wait for the caller's
// whole deadline.
const QueryTimeout = 5 * time.Second

// DefaultJournalEntries is how many journal entries "machine show" prints
// unless --journal says otherwise.
const DefaultJournalEntries = 10

// journalPage bounds one journal request; agents accept up to 500.
const journalPage = 100

// Host statuses of "machine list".
const (
	HostOK          = "ok"
	HostUnreachable = "unreachable"
	// HostError is a host that answered but not with a report (a refused
	// token, a malformed answer, a bad ca_file).
	HostError = "error"
)

func (a *app) machineCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "machine",
		Short: "List the mesh's machines, or show what one runs and was told",
		Long: `machine reads the machines of the mesh config: what each host reports it
runs, what its machine workflow is pushing and has queued, and the host's
journal of what it was told.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.machineListCommand(), a.machineShowCommand())
	return cmd
}

// machineRow is one line of machine list.
type machineRow struct {
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

func (a *app) machineListCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the machines with their tier, modules, last sequence, queue and host status",
		Long: `list shows every machine of the mesh config with its tier and modules, what
its machine workflow says (LAST SEQ sent, QUEUE of waiting requests, "+1"
while one is being pushed; "-" when no plan has pushed the machine yet, "?"
when Temporal could not be asked), and HOST STATUS: ok when the host
answered its report within ` + HostCheckTimeout.String() + `, unreachable when it did not, error when
it answered with something else (a refused token, a bad ca_file).

An unreachable host is listed, not a failure. An unreachable Temporal is:
the hosts are still listed, then list exits 1.`,
		Example: `  starter machine list
  starter machine list --output json`,
		Args: cobra.NoArgs,
		RunE: a.run(func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := a.loadConfig()
			if err != nil {
				return err
			}
			rows, terr := a.machineRows(cmd.Context(), cfg)
			if a.json() {
				err = a.printJSON(rows)
			} else {
				err = writeMachineList(a.stdout, rows)
			}
			if err != nil {
				return err
			}
			return terr
		}),
	}
}

// machineRows asks every host and machine workflow at once. Only
// Temporal being unreachable is an error; everything else is in the rows.
func (a *app) machineRows(ctx context.Context, cfg *config.Config) ([]machineRow, error) {
	names := cfg.MachineNames()
	rows := make([]machineRow, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		m := cfg.Machines[name]
		rows[i] = machineRow{Machine: name, Tier: m.Tier, Modules: m.Modules, Host: m.Host}
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
	c, derr := a.dial(ctx, cfg)
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

// writeMachineList is machine list's table.
func writeMachineList(w io.Writer, rows []machineRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MACHINE\tTIER\tMODULES\tHOST\tLAST SEQ\tQUEUE\tHOST STATUS")
	for _, r := range rows {
		seq, queue := "-", "-"
		if r.WorkflowError != "" {
			seq, queue = "?", "?"
		}
		if r.LastSeq != nil {
			seq = strconv.FormatUint(*r.LastSeq, 10)
		}
		if r.Queue != nil {
			queue = strconv.Itoa(*r.Queue)
			if r.Current != nil {
				queue += "+1"
			}
		}
		modules := strings.Join(r.Modules, ",")
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Machine, r.Tier, dash(modules), r.Host, seq, queue, r.HostStatus)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// machineView is machine show's JSON output and what its table is drawn
// from. Each part is filled independently, so that a dead host still shows
// the workflow's side and the reverse; the *_error fields say what could not
// be read.
type machineView struct {
	Machine string   `json:"machine"`
	Host    string   `json:"host"`
	Tier    int      `json:"tier"`
	Modules []string `json:"modules"`
	// Seq is the last sequence the host reports it applied; null when the
	// host could not be read.
	Seq *uint64 `json:"seq"`
	// ReportedMachine is the machine the host says it is, when that is not
	// Machine: the config points at the wrong host.
	ReportedMachine string          `json:"reported_machine,omitempty"`
	Containers      []viewContainer `json:"containers"`
	HostError       string          `json:"host_error,omitempty"`
	// Workflow is null when the machine has no workflow yet (no plan has
	// pushed it) or it could not be asked (WorkflowError).
	Workflow      *viewWorkflow  `json:"workflow"`
	WorkflowError string         `json:"workflow_error,omitempty"`
	Journal       []journalEntry `json:"journal"`
	JournalError  string         `json:"journal_error,omitempty"`
}

// viewContainer is a container as the host reports it, without the
// settings (args, env) it runs with.
type viewContainer struct {
	Module     string `json:"module"`
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
	Commit     string `json:"commit,omitempty"`
	Plan       string `json:"plan"`
	Seq        uint64 `json:"seq"`
	State      string `json:"state"`
	Since      string `json:"since,omitempty"`
}

type viewWorkflow struct {
	ID      string                  `json:"id"`
	LastSeq uint64                  `json:"last_seq"`
	Current *meshapi.QueuedRequest  `json:"current"`
	Queue   []meshapi.QueuedRequest `json:"queue"`
}

// journalEntry is a host journal entry with the containers cut to what
// says which build was meant.
type journalEntry struct {
	Index      uint64             `json:"index"`
	Time       time.Time          `json:"time"`
	Outcome    string             `json:"outcome"`
	Seq        uint64             `json:"seq"`
	Plan       string             `json:"plan"`
	Request    string             `json:"request,omitempty"`
	Force      bool               `json:"force"`
	ForcedPast string             `json:"forced_past,omitempty"`
	Code       string             `json:"code,omitempty"`
	Message    string             `json:"message,omitempty"`
	Containers []journalContainer `json:"containers"`
}

type journalContainer struct {
	Module     string `json:"module"`
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
}

func (a *app) machineShowCommand() *cobra.Command {
	var entries int
	cmd := &cobra.Command{
		Use:   "show NAME [--journal N]",
		Short: "Show what a machine runs, what its workflow is pushing, and its journal",
		Long: `show reads one machine three ways, each on its own:

  the host's report     what runs: module, digest, generation, plan,
                        sequence and state of each container
  the machine workflow  the last sequence it sent, the request it is
                        pushing and the ones queued behind it
  the host's journal    the latest --journal entries: what the host was
                        told (sequence, plan, digests, force) and what it did

A host that cannot be reached is said so and the workflow part is still
shown (and the reverse when Temporal cannot be reached); show then exits 1.
A machine no plan has pushed yet has no machine workflow; that is not an
error.`,
		Example: `  starter machine show edge-1
  starter machine show control-node --journal 50 --output json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%s takes one machine name (see \"starter machine list\"), got %d arguments", cmd.CommandPath(), len(args))
			}
			return nil
		},
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, args []string) error {
		if entries < 0 {
			return usagef(nil, "--journal %d: want 0 or more", entries)
		}
		cfg, path, err := a.loadConfig()
		if err != nil {
			return err
		}
		name := args[0]
		m, ok := cfg.Machines[name]
		if !ok {
			known := "none"
			if names := cfg.MachineNames(); len(names) > 0 {
				known = strings.Join(names, ", ")
			}
			return usagef(nil, "unknown machine %q (known: %s); add it to machines: in %s", name, known, path)
		}
		v, err := a.machineView(cmd.Context(), cfg, name, m, entries)
		if a.json() {
			if perr := a.printJSON(v); perr != nil {
				return perr
			}
		} else if perr := writeMachineView(a.stdout, v); perr != nil {
			return perr
		}
		return err
	})
	cmd.Flags().IntVar(&entries, "journal", DefaultJournalEntries, "how many of the host journal's latest entries to show (0 for none)")
	return cmd
}

// machineView reads the host and the machine workflow at once. The error
// names every part that could not be read; the view holds the rest.
func (a *app) machineView(ctx context.Context, cfg *config.Config, name string, m config.Machine, entries int) (machineView, error) {
	v := machineView{Machine: name, Host: m.Host, Tier: m.Tier, Modules: m.Modules, Containers: []viewContainer{}, Journal: []journalEntry{}}
	if v.Modules == nil {
		v.Modules = []string{}
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
			v.Seq = &rep.LastSeq
			if rep.Machine != "" && rep.Machine != name {
				v.ReportedMachine = rep.Machine
			}
			for _, c := range rep.Containers {
				v.Containers = append(v.Containers, viewContainer{
					Module: c.Module, Digest: c.Digest, Generation: c.Generation, Commit: c.Commit,
					Plan: c.Plan, Seq: c.Seq, State: c.State, Since: c.Since,
				})
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
				v.Journal = es
			})
		}
	}
	wg.Go(func() {
		c, err := a.dial(ctx, cfg)
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
			v.Workflow = &viewWorkflow{ID: meshapi.MachineID(name), LastSeq: st.LastSeq, Current: st.Current, Queue: st.Queue}
		}
	})
	wg.Wait()

	var msgs []string
	var errs []error
	if hostErr != nil {
		v.HostError = hostProblem(m.Host, hostErr)
		msgs, errs = append(msgs, v.HostError), append(errs, hostErr)
	}
	// A journal that fails the way the report did says nothing new.
	if journalErr != nil {
		v.JournalError = "journal: " + hostProblem(m.Host, journalErr)
		if hostErr == nil {
			msgs, errs = append(msgs, v.JournalError), append(errs, journalErr)
		}
	}
	if wfErr != nil {
		v.WorkflowError = wfErr.Error()
		msgs, errs = append(msgs, v.WorkflowError), append(errs, wfErr)
	}
	if len(errs) == 0 {
		return v, nil
	}
	return v, &messageError{msg: "machine " + name + ": " + strings.Join(msgs, "; "), err: errors.Join(errs...)}
}

// hostProblem words a host error for the operator: "host <url>
// unreachable: <cause>" when it did not answer, the error as it is (it names
// the host) otherwise.
func hostProblem(url string, err error) string {
	var u *host.UnreachableError
	if errors.As(err, &u) {
		return fmt.Sprintf("host %s unreachable: %v", u.URL, u.Err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("host %s unreachable: %v", url, err)
	}
	return err.Error()
}

// journal reads the latest n entries, newest first, paging as needed.
func journal(ctx context.Context, hc *host.HTTPClient, n int) ([]journalEntry, error) {
	out := []journalEntry{}
	var before uint64
	for len(out) < n {
		page, err := hc.Journal(ctx, before, min(n-len(out), journalPage))
		if err != nil {
			return out, err
		}
		for _, e := range page.Entries {
			if len(out) == n {
				break
			}
			je := journalEntry{
				Index: e.Index, Time: e.Time, Outcome: e.Outcome, Seq: e.Seq, Plan: e.Plan, Request: e.Request,
				Force: e.Force, ForcedPast: e.ForcedPast, Code: e.Code, Message: e.Message,
				Containers: []journalContainer{},
			}
			for _, c := range e.Containers {
				je.Containers = append(je.Containers, journalContainer{Module: c.Module, Digest: c.Digest, Generation: c.Generation})
			}
			out = append(out, je)
		}
		if page.NextBefore == 0 || len(page.Entries) == 0 {
			break
		}
		before = page.NextBefore
	}
	return out, nil
}

// writeMachineView is machine show's table: the config's line, then the
// host's containers, the workflow's queue and the journal, each saying
// plainly when it could not be read.
func writeMachineView(w io.Writer, v machineView) error {
	var b strings.Builder
	fmt.Fprintf(&b, "machine %s  tier %d  modules %s  host %s\n", v.Machine, v.Tier, dash(strings.Join(v.Modules, ", ")), v.Host)

	b.WriteString("\n")
	switch {
	case v.HostError != "":
		fmt.Fprintf(&b, "%s\n", v.HostError)
	default:
		fmt.Fprintf(&b, "host reports last seq %d\n", deref(v.Seq))
		if v.ReportedMachine != "" {
			fmt.Fprintf(&b, "warning: the host says it is machine %s, not %s; check machines.%s.host\n", v.ReportedMachine, v.Machine, v.Machine)
		}
		if len(v.Containers) == 0 {
			b.WriteString("no containers\n")
		} else {
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODULE\tDIGEST\tGEN\tPLAN\tSEQ\tSTATE\tSINCE")
			for _, c := range v.Containers {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", c.Module, dash(mesh.ShortDigest(c.Digest)), c.Generation, dash(c.Plan), c.Seq, c.State, dash(c.Since))
			}
			_ = tw.Flush()
		}
	}

	b.WriteString("\n")
	id := meshapi.MachineID(v.Machine)
	switch {
	case v.WorkflowError != "":
		fmt.Fprintf(&b, "workflow %s: %s\n", id, v.WorkflowError)
	case v.Workflow == nil:
		fmt.Fprintf(&b, "workflow %s: no machine workflow yet (no plan has pushed it)\n", id)
	default:
		wf := v.Workflow
		pushing := "idle"
		if wf.Current != nil {
			pushing = "pushing " + wf.Current.Request
		}
		fmt.Fprintf(&b, "workflow %s: last seq %d, %s, %d queued\n", id, wf.LastSeq, pushing, len(wf.Queue))
		if wf.Current != nil || len(wf.Queue) > 0 {
			tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "#\tPLAN\tMODULE\tDIGEST\tGEN")
			row := func(pos string, r meshapi.QueuedRequest) {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", pos, r.Plan, r.Module, dash(mesh.ShortDigest(r.Digest)), r.Generation)
			}
			if wf.Current != nil {
				row("now", *wf.Current)
			}
			for i, r := range wf.Queue {
				row(strconv.Itoa(i+1), r)
			}
			_ = tw.Flush()
		}
	}

	b.WriteString("\n")
	switch {
	case v.JournalError != "" && v.HostError != "":
		// The host's line above says it.
	case v.JournalError != "" && len(v.Journal) == 0:
		fmt.Fprintf(&b, "%s\n", v.JournalError)
	case len(v.Journal) == 0:
		b.WriteString("journal: no entries\n")
	default:
		fmt.Fprintf(&b, "journal (latest %d, newest first):\n", len(v.Journal))
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "INDEX\tTIME\tOUTCOME\tSEQ\tPLAN\tCONTAINERS\tFORCE")
		for _, e := range v.Journal {
			cs := make([]string, len(e.Containers))
			for i, c := range e.Containers {
				cs[i] = c.Module + "=" + dash(mesh.ShortDigest(c.Digest))
			}
			force := "-"
			if e.Force {
				force = "forced"
				if e.ForcedPast != "" {
					force += " past " + e.ForcedPast
				}
			}
			outcome := e.Outcome
			if e.Code != "" {
				outcome += " (" + e.Code + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", e.Index, e.Time.Local().Format(timeLayout), outcome, e.Seq,
				dash(e.Plan), dash(strings.Join(cs, ",")), oneLine(force))
		}
		_ = tw.Flush()
		if v.JournalError != "" {
			fmt.Fprintf(&b, "%s\n", v.JournalError)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// hostClient is the host API client for a machine as the worker makes it:
// its token and, for a private CA, its ca_file.
func hostClient(m config.Machine) (*host.HTTPClient, error) {
	c, err := m.HostClient()
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", m.Host, err)
	}
	return c, nil
}

func hostReport(ctx context.Context, m config.Machine) (mesh.Report, error) {
	c, err := hostClient(m)
	if err != nil {
		return mesh.Report{}, err
	}
	return c.Report(ctx)
}

// machineState is plans.MachineState bounded by QueryTimeout.
func machineState(ctx context.Context, c client.Client, machine string) (meshapi.MachineState, error) {
	ctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	return plans.MachineState(ctx, c, machine)
}

func deref(p *uint64) uint64 {
	if p == nil {
		return 0
	}
	return *p
}

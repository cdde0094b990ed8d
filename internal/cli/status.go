package cli

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/fleetwatch"
	"github.com/meshroll/meshroll/internal/levers"
	"github.com/meshroll/meshroll/internal/logging"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// DefaultStatusInterval is how often "status --watch" redraws unless
// --interval says otherwise: about as often as a push moves.
const DefaultStatusInterval = 2 * time.Second

// MinStatusInterval is the shortest --interval: every refresh asks every
// host, and a watch must not turn into a load on the fleet.
const MinStatusInterval = 100 * time.Millisecond

// clearScreen moves a terminal's cursor home and clears it, for --watch to
// redraw in place.
const clearScreen = "\x1b[H\x1b[2J"

func (a *app) statusCommand() *cobra.Command {
	var f machines.StatusFilter
	var sel string
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "status [--module M] [--machine NAME] [--selector S] [--watch [--interval 2s]]",
		Short: "Show every machine × module: what runs, how far behind, which plan, drift",
		Long: `status shows the fleet: for every machine, each module the mesh config gives
it and each its host reports running, sorted by tier, machine and module:

  GEN, COMMIT  the build that runs, by the host's report
  HEALTH       healthy, unhealthy or unknown as the host judges it; starting,
               exited or crash-looping when it does not run; with its
               restarts since it was declared
  BEHIND       how many generations (main-line commits) it is below the
               newest build of the module that runs healthy anywhere in the
               fleet: 0 when it runs that build or a newer one; "-" when
               nothing runs here or the module runs healthy nowhere
  PLAN, SEQ    the declaration that last named it: the plan that put it
               there, or a later plan of another module that kept it; a
               plan whose build failed here and put the machine back on
               what it ran is marked "(put back)"
  QUEUE        the machine workflow's requests waiting, "+1" while one is
               being pushed; "-" when no plan has pushed the machine yet
  DRIFT        missing: the config gives the machine the module and its host
               does not run it; unexpected: the host runs a module the config
               does not give the machine
  FROZEN       frozen when a freeze holds this module's plans on this machine
               (each freeze in force is listed below the table); "?" when
               the freezes could not be read (the worker answers for them)

PLAN is cut to plan/<module>/<12 digits of the commit>. --output json has
every field in full: "rows", one a machine and module; "machines", each
machine's host and workflow once (as "starter machine list" gives them); and
"newest_healthy", the generation BEHIND counts from, by module.

LABELS, shown when a machine has any, are the machine's labels from the mesh
config; --selector keeps the machines they match (ring=canary, site in
(fra1, ams2), gpu, !gpu; a comma is and).

The hosts are read from the fleet picture the worker keeps (it long-polls
every host into its catalogue), in one read, when status can open that
catalogue (catalogue.dsn, or the SQLite file in the state directory): HEARD
then says how long ago the worker last heard each host. A host that fails is
"unreachable since" when, one silent past ` + fleetwatch.StaleAfter.String() + ` is "stale", one the
picture has nothing of yet is "unknown" (only --machine then asks that host
directly). Without the catalogue every host is asked directly, within
` + machines.HostCheckTimeout.String() + `, and a line below the table says why. Every host counts, also with
--module, --machine or --selector: BEHIND counts from the whole fleet. A host
that cannot be read is named below the table and its rows show "?" for all
it would have said. An unreachable Temporal is named too, and status
then exits 1, after printing what the hosts said.

--watch redraws every --interval until interrupted: in place on a terminal;
otherwise one table after another, and with --output json one object a line
(JSON Lines). A watch goes on when a host or Temporal does not answer, saying
so, and exits 0 when interrupted.`,
		Example: `  starter status
  starter status --module host --output json
  starter status --machine edge-1 --watch --interval 5s
  starter status --selector "ring=canary"`,
		Args: cobra.NoArgs,
	}
	cmd.RunE = a.run(func(cmd *cobra.Command, _ []string) error {
		if interval < MinStatusInterval {
			return usagef(nil, "--interval %s: want at least %s", interval, MinStatusInterval)
		}
		if cmd.Flags().Changed("interval") && !watch {
			return usagef(nil, "--interval %s needs --watch", interval)
		}
		cfg, path, err := a.loadConfig(cmd.Context())
		if err != nil {
			return err
		}
		// Checked before Temporal is dialled or a host asked: a filter
		// naming nothing in the mesh is the command line's fault.
		if err := knownScope(cfg, path, f.Module, f.Machine); err != nil {
			return err
		}
		if f.Selector, _, err = selectMachines(cfg, path, sel); err != nil {
			return err
		}
		src, closePic, why := a.statusPicture(cmd.Context(), cfg, path)
		defer closePic()
		if watch {
			return a.watchStatus(cmd.Context(), cfg, src, why, f, interval)
		}
		d := &keptDial{dial: a.dialer(cfg)}
		defer d.close()
		src.Dial = d.Dial
		st, terr := machines.ReadStatus(cmd.Context(), cfg, src, f)
		st.SetHostsNote(why)
		st.SetFreezes(readFreezes(cmd.Context(), cfg, d.Dial))
		st.Pending = readPending(cmd.Context(), cfg, d.Dial)
		return printRead(a, st, writeStatus, terr)
	})
	fl := cmd.Flags()
	fl.StringVar(&f.Module, "module", "", "only this module's rows")
	fl.StringVar(&f.Machine, "machine", "", "only this machine's rows")
	fl.StringVar(&sel, "selector", "", selectorHelp)
	fl.BoolVar(&watch, "watch", false, "redraw every --interval until interrupted")
	fl.DurationVar(&interval, "interval", DefaultStatusInterval, "time between --watch refreshes")
	return cmd
}

// watchStatus reads the status every interval until ctx ends, writing each
// refresh in one Write (so that a reader sees it whole): on a terminal it
// clears the screen first; with --output json it is one line. What a refresh
// could not read is shown in it, never the end of the watch; the end of ctx
// (Ctrl-C) is, and is not a failure.
func (a *app) watchStatus(ctx context.Context, cfg *config.Config, src machines.Sources, why error, f machines.StatusFilter, interval time.Duration) error {
	d := &keptDial{dial: a.dialer(cfg)}
	defer d.close()
	src.Dial = d.Dial
	tty := !a.json() && logging.IsTerminal(a.stdout)
	var freezes []mesh.Freeze
	var freezesErr error
	var freezesAt time.Time
	var pending []meshapi.Enrollment
	for {
		st, _ := machines.ReadStatus(ctx, cfg, src, f)
		st.SetHostsNote(why)
		if time.Since(freezesAt) >= FreezesRefresh {
			freezes, freezesErr = readFreezes(ctx, cfg, d.Dial)
			pending = readPending(ctx, cfg, d.Dial)
			freezesAt = time.Now()
		}
		st.SetFreezes(freezes, freezesErr)
		st.Pending = pending
		if ctx.Err() != nil {
			// Interrupted mid-read: what was read is cut short, not news.
			return nil
		}
		var b bytes.Buffer
		if a.json() {
			if err := json.NewEncoder(&b).Encode(st); err != nil {
				return fmt.Errorf("encode status: %w", err)
			}
		} else {
			if tty {
				b.WriteString(clearScreen)
			}
			fmt.Fprintf(&b, "status at %s, every %s (Ctrl-C to stop)\n\n", st.AskedAt.Local().Format(timeLayout), interval)
			if err := writeStatus(&b, st); err != nil {
				return err
			}
			if !tty {
				b.WriteString("\n")
			}
		}
		if _, err := a.stdout.Write(b.Bytes()); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// FreezesRefresh is how often --watch reads the freezes again: each read
// is a short workflow on the worker (the catalogue is its), so a watch
// reads them far less often than it asks the hosts.
const FreezesRefresh = 30 * time.Second

// freezesTimeout bounds reading the freezes: status must not wait on a
// worker that is not there.
const freezesTimeout = 10 * time.Second

// readPending lists the machines waiting to be admitted, when enrollment
// is on; what cannot be read is left out (approve and deny say it).
func readPending(ctx context.Context, cfg *config.Config, dial machines.Dial) []meshapi.Enrollment {
	if len(cfg.Enroll.Modules) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, freezesTimeout)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return nil
	}
	defer c.Close()
	es, _ := enroll.In(c, cfg).List(ctx, meshapi.EnrollPending)
	return es
}

// readFreezes lists the freezes in force through the worker.
func readFreezes(ctx context.Context, cfg *config.Config, dial machines.Dial) ([]mesh.Freeze, error) {
	ctx, cancel := context.WithTimeout(ctx, freezesTimeout)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	res, err := levers.Freezes(ctx, c, cfg.Temporal.TaskQueue)
	if err != nil {
		return nil, err
	}
	return res.Freezes, nil
}

// keptDial dials Temporal once for a whole --watch and gives every refresh
// that client, rather than a connection each refresh; a dial that fails is
// tried again at the next one.
type keptDial struct {
	dial machines.Dial
	mu   sync.Mutex
	c    client.Client
}

// Dial is a machines.Dial whose client's Close leaves the connection open
// for the next refresh.
func (k *keptDial) Dial(ctx context.Context) (client.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c == nil {
		c, err := k.dial(ctx)
		if err != nil {
			return nil, err
		}
		k.c = c
	}
	return keptClient{k.c}, nil
}

func (k *keptDial) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

// keptClient is a client whose Close is keptDial's to make.
type keptClient struct{ client.Client }

func (keptClient) Close() {}

// writeStatus is status's table, then a line for each host and workflow
// that could not be read.
func writeStatus(w io.Writer, st machines.Status) error {
	var b strings.Builder
	queues, labels := map[string]string{}, map[string]string{}
	labelled := false
	for _, m := range st.Machines {
		queues[m.Machine] = queueCell(m)
		labels[m.Machine] = "\t" + config.LabelString(m.Labels)
		labelled = labelled || len(m.Labels) > 0
	}
	labelsHead := "\tLABELS"
	if !labelled {
		// No column for a fleet without labels.
		labels, labelsHead = map[string]string{}, ""
	}
	// HEARD, for hosts read from the fleet picture: how old each row is.
	heard, heardHead := map[string]string{}, ""
	if st.HostsFrom == machines.HostsFromPicture {
		heardHead = "\tHEARD"
		for _, m := range st.Machines {
			heard[m.Machine] = "\t" + strings.TrimPrefix(m.HostFreshness, "heard ")
		}
	}
	if len(st.Rows) == 0 {
		b.WriteString("no module matches: no machine asked is given it or runs it\n")
	} else {
		tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "MACHINE\tTIER"+labelsHead+"\tMODULE\tGEN\tCOMMIT\tHEALTH\tBEHIND\tPLAN\tSEQ\tQUEUE\tDRIFT\tFROZEN"+heardHead)
		for _, r := range st.Rows {
			drift := dash(r.Drift)
			switch {
			case r.HostError != "":
				drift = "?"
			case r.NoneYet:
				drift = "missing (none yet)"
			}
			frozen := "-"
			switch {
			case st.FreezesError != "":
				frozen = "?"
			case r.Frozen:
				frozen = "frozen"
			}
			fmt.Fprintf(tw, "%s\t%d%s\t%s\t%s\t%s\t%s\t%s%s\n", r.Machine, r.Tier, labels[r.Machine], r.Module, statusCells(r), queues[r.Machine], drift, frozen, heard[r.Machine])
		}
		_ = tw.Flush()
	}
	b.WriteString(readErrors(st.Machines, nil))
	for _, fz := range st.Freezes {
		fmt.Fprintf(&b, "frozen: %s: %s\n", fz.Scope(), oneLine(fz.String()))
	}
	if st.FreezesError != "" {
		fmt.Fprintf(&b, "freezes not read: %s\n", oneLine(st.FreezesError))
	}
	for _, e := range st.Pending {
		fmt.Fprintf(&b, "pending: %s asked to enroll %s ago (host %s, labels %s); nothing is pushed to it until: starter machine approve %s\n",
			e.Ask.Machine, max(st.AskedAt.Sub(e.Ask.At), 0).Round(time.Second), e.Ask.Host, config.LabelString(e.Ask.Labels), e.Ask.Machine)
	}
	if st.HostsNote != "" {
		fmt.Fprintf(&b, "every host asked directly: no fleet picture here (%s)\n", oneLine(st.HostsNote))
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// readErrors says, below a table of machines, what could not be read of
// each: a host's error on a line of its own, a machine workflow's too, or
// the workflows' once for all when every one failed alike (Temporal
// unreachable, their list failed) — unless that is exiting, the error the
// command ends with and says itself.
func readErrors(ms []machines.Row, exiting error) string {
	var b strings.Builder
	common := machines.CommonWorkflowError(ms)
	for _, m := range ms {
		if m.HostError != "" {
			fmt.Fprintf(&b, "%s: %s\n", m.Machine, oneLine(m.HostError))
		}
		if m.WorkflowError != "" && common == "" {
			fmt.Fprintf(&b, "%s: workflow %s: %s\n", m.Machine, meshapi.MachineID(m.Machine), oneLine(m.WorkflowError))
		}
	}
	if common != "" && (exiting == nil || common != exiting.Error()) {
		fmt.Fprintf(&b, "machine workflows not asked: %s\n", oneLine(common))
	}
	return b.String()
}

// statusCells is a row's GEN to SEQ columns, tab-separated: "?" throughout
// when the host could not be asked, "-" where nothing runs.
func statusCells(r machines.StatusRow) string {
	if r.HostError != "" {
		return "?\t?\t?\t?\t?\t?"
	}
	if r.Generation == nil {
		return "-\t-\t-\t-\t-\t-"
	}
	behind := "-"
	if r.Behind != nil {
		behind = strconv.FormatInt(*r.Behind, 10)
	}
	plan := dash(shortPlan(r.Plan))
	if r.PutBack {
		plan += " (put back)"
	}
	return strings.Join([]string{
		strconv.FormatInt(*r.Generation, 10), dash(mesh.ShortCommit(r.Commit)), healthCell(r), behind,
		plan, strconv.FormatUint(*r.Seq, 10),
	}, "\t")
}

// healthCell says how the container is: its state when it does not run,
// else its health as the host judges it ("running" from a host that does
// not judge health), and how often it restarted.
func healthCell(r machines.StatusRow) string {
	h := r.Health
	switch {
	case r.State != "" && r.State != mesh.StateRunning:
		h = r.State
	case h == "":
		h = dash(r.State)
	}
	switch r.Restarts {
	case 0:
	case 1:
		h += " (1 restart)"
	default:
		h += fmt.Sprintf(" (%d restarts)", r.Restarts)
	}
	return h
}

// shortPlan cuts a plan ID's commit as ShortCommit does; an ID PlanID did
// not make is kept whole.
func shortPlan(id string) string {
	if m, c, ok := meshapi.ParsePlanID(id); ok {
		return meshapi.PlanID(m, mesh.ShortCommit(c))
	}
	return id
}

package fleetui

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/enroll"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/parallel"
	"github.com/meshroll/meshroll/internal/plans"
)

// Source is where the page reads the fleet. Every method only reads. The
// worker's is Reader; the handlers' tests give a fake of their own, so that
// every state a page must show (a host that does not answer, Temporal
// unreachable, a plan at its gate) is one they can set up.
type Source interface {
	// Status is what every machine runs and what its machine workflow is
	// doing, as `starter status` reads it. The error is Temporal's alone
	// (the hosts' answers are kept in the Status, and a host that did not
	// answer is named in its rows).
	Status(ctx context.Context) (machines.Status, error)
	// Freezes are the freezes in force.
	Freezes(ctx context.Context) ([]mesh.Freeze, error)
	// Rejected answers, of digests, those an operator rejected.
	Rejected(ctx context.Context, digests []string) (map[string]mesh.Rejection, error)
	// Plans are the plans whose workflow runs, newest first, each with
	// its state (or why it could not be read).
	Plans(ctx context.Context) ([]Plan, error)
	// Recent are the newest plans, running or ended, at most n, as the
	// visibility store lists them.
	Recent(ctx context.Context, n int) ([]plans.Summary, error)
	// Machine is one machine as `starter machine show` reads it, without
	// the journal. Its error names every part that could not be read; the
	// Detail holds the rest.
	Machine(ctx context.Context, name string) (machines.Detail, error)
	// Journal is up to n entries of a machine's journal older than entry
	// before (0: from the newest).
	Journal(ctx context.Context, name string, before uint64, n int) (machines.JournalPage, error)
	// Logs is the last tail lines of module's output on machine name, as
	// its host gives them (host.LogStreamer); the error is the host's.
	Logs(ctx context.Context, name, module string, tail int) (string, error)
}

// Plan is a plan in flight: what the visibility store lists and what the
// plan answers of itself.
type Plan struct {
	Summary plans.Summary
	// State is the plan's answer to its state query; nil when it could not
	// be asked (Error says why).
	State *meshapi.PlanState
	Error string
}

// Reader is the worker's Source: the mesh config it runs, its Temporal
// client and its catalogue, read the way the starter reads them
// (machines.ReadStatus, plans.List and plans.State), except the freezes,
// which the worker reads from its catalogue directly rather than through a
// lever workflow.
type Reader struct {
	Config    config.Source
	Client    client.Client
	Catalogue catalogue.Catalogue
	// Feed, when set, gives the machine workflows' summaries while it is
	// current (the feed the worker keeps in its catalogue,
	// machinefeed.Kept): the page then lists no machine workflow itself.
	Feed machines.Feed
}

// planStateTimeout bounds one plan's state query: a plan that does not
// answer is shown as such rather than holding up the page.
const planStateTimeout = 10 * time.Second

// planQueries bounds the plans asked at once.
const planQueries = 16

// Status implements Source: the hosts from the catalogue's fleet picture,
// which the worker's watcher keeps current, in one read rather than a call
// to every host per refresh, and the machine workflows from Feed while it
// is current rather than a list of every one.
func (r Reader) Status(ctx context.Context) (machines.Status, error) {
	var pic machines.Picture
	if r.Catalogue != nil {
		pic = r.Catalogue.HostStates
	}
	cfg := r.Config.Current()
	st, err := machines.ReadStatus(ctx, cfg, machines.Sources{Dial: r.dial, Hosts: pic, Workflows: r.Feed}, machines.StatusFilter{})
	if err == nil && len(cfg.Enroll.Modules) > 0 {
		// What cannot be listed is left out: the machine workflows were
		// just read, so Temporal answers, and the pending are news only.
		st.Pending, _ = enroll.In(r.Client, cfg).List(ctx, meshapi.EnrollPending)
	}
	return st, err
}

// healthTimeout bounds the frontend's health check before a read.
const healthTimeout = 3 * time.Second

// dial hands machines the worker's own client, whose Close must not close
// the worker's connection, once the frontend answers a health check: the
// worker's client connects lazily and never fails to "dial", so without it
// an unreachable Temporal would show as every machine workflow failing its
// query, each after its own timeout, rather than as what it is.
func (r Reader) dial(ctx context.Context) (client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, healthTimeout)
	defer cancel()
	if _, err := r.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return nil, fmt.Errorf("temporal %s unreachable: %w", r.Config.Current().Temporal.Address, err)
	}
	return keptClient{r.Client}, nil
}

// keptClient is the worker's client with a Close that leaves it open.
type keptClient struct{ client.Client }

func (keptClient) Close() {}

// Freezes implements Source.
func (r Reader) Freezes(ctx context.Context) ([]mesh.Freeze, error) {
	fs, err := r.Catalogue.Freezes(ctx)
	if err != nil {
		return nil, fmt.Errorf("read freezes: %w", err)
	}
	return fs, nil
}

// Rejected implements Source.
func (r Reader) Rejected(ctx context.Context, digests []string) (map[string]mesh.Rejection, error) {
	out := map[string]mesh.Rejection{}
	for _, d := range digests {
		rej, ok, err := r.Catalogue.Rejected(ctx, d)
		if err != nil {
			return out, fmt.Errorf("read rejections: %w", err)
		}
		if ok {
			out[d] = rej
		}
	}
	return out, nil
}

// Plans implements Source.
func (r Reader) Plans(ctx context.Context) ([]Plan, error) {
	sums, err := plans.List(ctx, r.Client, r.Config.Current().Temporal.Namespace, plans.ListFilter{TaskQueue: r.Config.Current().Temporal.TaskQueue, Running: true})
	if err != nil {
		return nil, err
	}
	out := make([]Plan, len(sums))
	// A plan that does not answer is shown with its error, not dropped:
	// each call keeps its own and returns none.
	_ = parallel.Each(len(sums), planQueries, func(i int) error {
		out[i].Summary = sums[i]
		qctx, cancel := context.WithTimeout(ctx, planStateTimeout)
		defer cancel()
		st, err := plans.State(qctx, r.Client, sums[i].Plan)
		if err != nil {
			out[i].Error = err.Error()
			return nil
		}
		out[i].State = &st
		return nil
	})
	return out, nil
}

// Recent implements Source.
func (r Reader) Recent(ctx context.Context, n int) ([]plans.Summary, error) {
	return plans.List(ctx, r.Client, r.Config.Current().Temporal.Namespace, plans.ListFilter{TaskQueue: r.Config.Current().Temporal.TaskQueue, Limit: n})
}

// Machine implements Source.
func (r Reader) Machine(ctx context.Context, name string) (machines.Detail, error) {
	m, ok := r.Config.Current().Machines[name]
	if !ok {
		return machines.Detail{}, fmt.Errorf("%w: %s", errUnknownMachine, name)
	}
	return machines.Show(ctx, r.dial, name, m, 0)
}

// Journal implements Source.
func (r Reader) Journal(ctx context.Context, name string, before uint64, n int) (machines.JournalPage, error) {
	m, ok := r.Config.Current().Machines[name]
	if !ok {
		return machines.JournalPage{}, fmt.Errorf("%w: %s", errUnknownMachine, name)
	}
	return machines.Journal(ctx, name, m, before, n)
}

// errUnknownMachine is a machine the mesh config does not have.
var errUnknownMachine = errors.New("no such machine in the mesh config")

// runningDigests are the distinct digests st's hosts report, sorted.
func runningDigests(st machines.Status) []string {
	var ds []string
	for _, r := range st.Rows {
		if r.Digest != "" {
			ds = append(ds, r.Digest)
		}
	}
	slices.Sort(ds)
	return slices.Compact(ds)
}

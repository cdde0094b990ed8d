package fleetui

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// matrixPage is the matrix and what sits above it.
type matrixPage struct {
	Matrix  matrixView
	Plans   []planView
	Holds   holdsView
	Modules []string
	Pending []pendingView
}

// pendingView is a machine whose agent asked to enroll, waiting for an
// operator: not in the mesh, so not in the matrix.
type pendingView struct {
	Machine, Host, Labels, Asked string
}

// pendingOf is the snapshot's pending machines, as of its read.
func pendingOf(snap *Snapshot) []pendingView {
	var out []pendingView
	for _, e := range snap.Status.Pending {
		out = append(out, pendingView{Machine: e.Ask.Machine, Host: e.Ask.Host, Labels: config.LabelString(e.Ask.Labels),
			Asked: max(snap.ReadAt.Sub(e.Ask.At), 0).Round(time.Second).String()})
	}
	return out
}

// holdsView is what holds roll-outs now: freezes and windows.
type holdsView struct {
	Freezes      []mesh.Freeze
	FreezesError string
	Windows      Windows
}

func holdsOf(snap *Snapshot) holdsView {
	return holdsView{Freezes: snap.Freezes, FreezesError: snap.FreezesError, Windows: snap.Windows}
}

func (s *Server) matrix(w http.ResponseWriter, r *http.Request) {
	snap, since, ok := s.snapshot(w, r)
	if !ok {
		return
	}
	cfg := s.o.Config.Current()
	modules := fleetModules(cfg.ModuleNames(), snap)
	m := buildMatrix(snap, modules, parseFilter(r.URL.Query(), modules))
	s.render(w, r, http.StatusOK, "matrix", page{
		Title: "Fleet", Nav: "matrix", Fresh: s.freshness(snap, since),
		Body: matrixPage{Matrix: m, Plans: buildPlans(snap, cfg.Temporal.UIURL, cfg.Temporal.Namespace), Holds: holdsOf(snap), Modules: modules, Pending: pendingOf(snap)},
	})
}

// fleetModules are the config's modules and any a host runs that the
// config does not name, sorted.
func fleetModules(config []string, snap *Snapshot) []string {
	set := map[string]bool{}
	for _, m := range config {
		set[m] = true
	}
	for _, r := range snap.Status.Rows {
		set[r.Module] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// plansPage is the plans in flight, what holds them and the latest ended.
type plansPage struct {
	Plans      []planView
	PlansError string
	Holds      holdsView
	Recent     []recentView
}

func (s *Server) plans(w http.ResponseWriter, r *http.Request) {
	snap, since, ok := s.snapshot(w, r)
	if !ok {
		return
	}
	cfg := s.o.Config.Current()
	ui, ns := cfg.Temporal.UIURL, cfg.Temporal.Namespace
	s.render(w, r, http.StatusOK, "plans", page{
		Title: "Plans in flight", Nav: "plans", Fresh: s.freshness(snap, since),
		Body: plansPage{Plans: buildPlans(snap, ui, ns), PlansError: snap.PlansError, Holds: holdsOf(snap), Recent: buildRecent(snap, ui, ns)},
	})
}

func (s *Server) machine(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	m, ok := s.o.Config.Current().Machines[name]
	if !ok {
		s.message(w, r, http.StatusNotFound, "No such machine", "The mesh config has no machine "+strconv.Quote(name)+".")
		return
	}
	var before uint64
	if b := r.URL.Query().Get("before"); b != "" {
		n, err := strconv.ParseUint(b, 10, 64)
		if err != nil {
			s.message(w, r, http.StatusBadRequest, "Not a journal page", "before="+strconv.Quote(b)+" is not an entry index; follow the page's own older and newer links.")
			return
		}
		before = n
	}
	snap, since, ok := s.snapshot(w, r)
	if !ok {
		return
	}
	v, fresh := s.readMachine(r.Context(), name, m.Modules, before, snap)
	fresh.Problems = append(fresh.Problems, s.freshness(snap, since).Problems...)
	s.render(w, r, http.StatusOK, "machine", page{Title: name, Nav: "machine", Fresh: fresh, Body: v})
}

// readMachine reads one machine now (its report, workflow and journal are
// one host and one query: cheap enough to read at every look), with the
// fleet's snapshot for its cells and plans.
func (s *Server) readMachine(ctx context.Context, name string, modules []string, before uint64, snap *Snapshot) (machineView, freshness) {
	started := s.o.Clock()
	var (
		d       machines.Detail
		why, jp machines.JournalPage
		whyErr  error
		jpErr   error
		logs    []moduleLog
		wg      sync.WaitGroup
	)
	wg.Go(func() { d, _ = s.o.Source.Machine(ctx, name) })
	wg.Go(func() { why, whyErr = s.o.Source.Journal(ctx, name, 0, whyDepth) })
	if before != 0 {
		wg.Go(func() { jp, jpErr = s.o.Source.Journal(ctx, name, before, journalPageSize) })
	}
	wg.Go(func() { logs = s.readLogs(ctx, name, modules) })
	wg.Wait()
	if before == 0 {
		// The newest page is the start of what "why" read.
		jp.Entries, jpErr = why.Entries[:min(len(why.Entries), journalPageSize)], whyErr
		jp.NextBefore = why.NextBefore
		if len(why.Entries) > journalPageSize {
			jp.NextBefore = why.Entries[journalPageSize-1].Index
		}
	}
	v := buildMachine(name, d, why, jp, before, snap)
	v.Logs = logs
	cfg := s.o.Config.Current()
	v.WorkflowLink = webUILink(cfg.Temporal.UIURL, cfg.Temporal.Namespace, meshapi.MachineID(name))
	if jpErr != nil && d.HostError == "" {
		v.JournalError = jpErr.Error()
	}
	took := s.o.Clock().Sub(started)
	return v, freshness{ReadAt: started, Took: took}
}

package machines

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/selector"
)

// Drift of a StatusRow: where what a machine runs and what the mesh config
// gives it disagree. A machine that drifted is one a push may not bring
// back (a module missing is added by the next plan of that module only if
// it has converged somewhere; an unexpected one is kept as it runs), so an
// operator has to see it.
const (
	// DriftNone: the config gives the machine the module and its host
	// reports it (or the host could not be asked, and nothing is known).
	DriftNone = ""
	// DriftMissing: the config gives the machine the module; its host does
	// not report it.
	DriftMissing = "missing"
	// DriftUnexpected: the host runs a module the config does not give the
	// machine.
	DriftUnexpected = "unexpected"
)

// StatusFilter narrows ReadStatus to one module, one machine, the machines
// a label selector picks, or all of these at once; the empty value is the
// whole fleet.
type StatusFilter struct {
	Module  string
	Machine string
	// Selector keeps the machines whose labels it matches (the zero
	// value matches every machine).
	Selector selector.Selector
}

// picks says whether the filter keeps machine m, called name.
func (f StatusFilter) picks(name string, m config.Machine) bool {
	return (f.Machine == "" || f.Machine == name) && f.Selector.Matches(m.Labels)
}

// Where a Status read its hosts.
const (
	// HostsFromPicture: the fleet picture the worker keeps (see Picture),
	// each machine's row saying how long ago its host was heard.
	HostsFromPicture = "picture"
	// HostsFromHosts: every host asked directly.
	HostsFromHosts = "hosts"
)

// Status is the fleet at one moment, as `starter status` shows it: what
// every machine runs of every module, how far behind the fleet's newest
// healthy build each is, and what the machine workflows are doing.
type Status struct {
	// AskedAt is when the hosts and workflows were asked.
	AskedAt time.Time `json:"asked_at"`
	// HostsFrom is where the hosts were read: HostsFromPicture or
	// HostsFromHosts.
	HostsFrom string `json:"hosts_from"`
	// WorkflowsFedAt, when set, is when the worker's feed of the machine
	// workflows' summaries (package machinefeed) read what Machines shows
	// of them: a second or two before AskedAt while it keeps up. Unset,
	// they were read at AskedAt.
	WorkflowsFedAt *time.Time `json:"workflows_fed_at,omitempty"`
	// HostsNote says why the hosts were asked directly (no fleet picture
	// here), when a reader knows.
	HostsNote string `json:"hosts_note,omitempty"`
	// NewestHealthy is, by module, the newest generation any host of the
	// fleet reports running healthy: what Behind counts from. A module
	// healthy nowhere (or on no host that answered) is absent. Every
	// host is read for it, whatever the filter.
	NewestHealthy map[string]int64 `json:"newest_healthy"`
	// Rows is one row a machine and module, sorted by tier, machine and
	// module.
	Rows []StatusRow `json:"rows"`
	// Machines is each machine's own part, as "machine list" shows it
	// (its host's status and error, its workflow's last sequence, queue
	// and current request), sorted by tier and machine: the queue is a
	// machine's, not a module's, so it is said once here.
	Machines []Row `json:"machines"`
	// Freezes are the freezes in force, as the worker's catalogue holds
	// them (read through a lever workflow, see SetFreezes); FreezesError
	// says why they could not be read, and Frozen is then unknown.
	Freezes      []mesh.Freeze `json:"freezes"`
	FreezesError string        `json:"freezes_error,omitempty"`
	// Pending are the machines whose agents asked to enroll and wait for
	// an operator (package enroll): not in the mesh, nothing pushed to
	// them. Read only with enrollment on (enroll.modules).
	Pending []meshapi.Enrollment `json:"pending,omitempty"`
}

// SetHostsNote records why there was no fleet picture to read (nil: there
// was one, or no reason is known).
func (st *Status) SetHostsNote(why error) {
	if why != nil && st.HostsFrom == HostsFromHosts {
		st.HostsNote = why.Error()
	}
}

// SetFreezes marks every row a freeze holds: plans of its module pushing
// its machine wait before their next batch. err is why the freezes could
// not be read; every row's Frozen is then unknown (false, with
// FreezesError set).
func (st *Status) SetFreezes(fs []mesh.Freeze, err error) {
	st.Freezes = fs
	if st.Freezes == nil {
		st.Freezes = []mesh.Freeze{}
	}
	if err != nil {
		st.FreezesError = err.Error()
	}
	for i := range st.Rows {
		r := &st.Rows[i]
		r.Frozen = slices.ContainsFunc(fs, func(f mesh.Freeze) bool { return f.Holds(r.Module, []string{r.Machine}) })
	}
}

// StatusRow is one module on one machine: over the modules the mesh config
// gives the machine and those its host reports running.
type StatusRow struct {
	Machine string `json:"machine"`
	Tier    int    `json:"tier"`
	Module  string `json:"module"`
	// Generation is what runs, by the host's report; null when the host
	// runs no such module or could not be asked (HostError).
	Generation *int64 `json:"generation"`
	// Commit is the build's commit as declared, or, from a host that was
	// not told it, the commit of the module's own plan that put it there.
	Commit       string `json:"commit"`
	Digest       string `json:"digest"`
	State        string `json:"state"`
	Health       string `json:"health"`
	HealthySince string `json:"healthy_since"`
	Restarts     int    `json:"restarts"`
	// Plan and Seq are the declaration that last named the container:
	// the plan that put it there, or a later plan of another module
	// that kept it as it ran.
	Plan string  `json:"plan"`
	Seq  *uint64 `json:"seq"`
	// PutBack marks a last declaration that put the machine back on this
	// build after Plan's build failed here: Plan is the plan that failed,
	// not the one that brought what runs, and a person reading the row must
	// not take it for either.
	PutBack bool `json:"put_back,omitempty"`
	// Behind is how many generations (main-line commits) the container is
	// below Status.NewestHealthy of its module: 0 when it runs that build
	// or newer; null when nothing runs here or the module runs healthy
	// nowhere.
	Behind *int64 `json:"behind"`
	// Drift is DriftNone, DriftMissing or DriftUnexpected.
	Drift string `json:"drift"`
	// NoneYet marks a missing module that runs healthy on no host that
	// answered: never rolled out (or down everywhere), which is the
	// module's state across the fleet, not this machine drifting.
	NoneYet bool `json:"none_yet,omitempty"`
	// HostError says why the host could not be asked: the row then holds
	// only what the config says.
	HostError string `json:"host_error,omitempty"`
	// Frozen is whether a freeze holds plans of this module pushing this
	// machine (Status.SetFreezes).
	Frozen bool `json:"frozen"`
}

// ReadStatus reads every host of cfg from src.Hosts (one read; with none,
// every host directly, each within HostCheckTimeout) and the machine
// workflows f picks (from src.Workflows while it is current), all at once,
// and words what they said as rows. Every host is read even for one
// machine or module, because Behind counts from the newest healthy build
// anywhere. Only for one machine (f.Machine) is
// its host asked directly when the picture has nothing of it. As for List,
// only Temporal being unreachable is an error, and the Status still holds
// what the hosts said; a host that could not be read is named in its rows
// and machine.
func ReadStatus(ctx context.Context, cfg *config.Config, src Sources, f StatusFilter) (Status, error) {
	asked := time.Now().UTC()
	one := func(name string) bool { return f.Machine != "" && name == f.Machine }
	rs, fedAt, err := readAll(ctx, cfg, cfg.MachineNames(), func(name string) bool { return f.picks(name, cfg.Machines[name]) }, src, one)
	st := statusOf(rs, f)
	st.AskedAt, st.WorkflowsFedAt = asked, fedAt
	st.HostsFrom = HostsFromHosts
	if src.Hosts != nil {
		st.HostsFrom = HostsFromPicture
	}
	return st, err
}

// statusOf words readings as a Status, narrowed by f.
func statusOf(rs []reading, f StatusFilter) Status {
	st := Status{NewestHealthy: map[string]int64{}, Rows: []StatusRow{}, Machines: []Row{}}
	for _, r := range rs {
		if r.hostErr != nil {
			continue
		}
		for _, c := range r.rep.Containers {
			if n, ok := st.NewestHealthy[c.Module]; c.Healthy() && (!ok || c.Generation > n) {
				st.NewestHealthy[c.Module] = c.Generation
			}
		}
	}
	for _, r := range rs {
		if !f.picks(r.name, r.m) {
			continue
		}
		mr := r.row()
		st.Machines = append(st.Machines, mr)
		for _, module := range r.modules() {
			if f.Module != "" && module != f.Module {
				continue
			}
			row := StatusRow{Machine: r.name, Tier: r.m.Tier, Module: module, HostError: mr.HostError}
			if r.hostErr == nil {
				row.fill(r, module, st.NewestHealthy)
			}
			st.Rows = append(st.Rows, row)
		}
	}
	if f.Module != "" {
		maps.DeleteFunc(st.NewestHealthy, func(m string, _ int64) bool { return m != f.Module })
	}
	slices.SortStableFunc(st.Machines, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Machine, b.Machine))
	})
	slices.SortStableFunc(st.Rows, func(a, b StatusRow) int {
		return cmp.Or(cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Machine, b.Machine), cmp.Compare(a.Module, b.Module))
	})
	return st
}

// modules is the union of the modules the config gives the machine and
// those its host reports (none when it could not be asked).
func (r reading) modules() []string {
	ms := slices.Clone(r.m.Modules)
	if r.hostErr == nil {
		for _, c := range r.rep.Containers {
			ms = append(ms, c.Module)
		}
	}
	slices.Sort(ms)
	return slices.Compact(ms)
}

// fill sets what the host reports of module, its drift and how far behind
// newest it is.
func (row *StatusRow) fill(r reading, module string, newest map[string]int64) {
	c, runs := r.rep.Running(module)
	expected := slices.Contains(r.m.Modules, module)
	switch {
	case !runs:
		_, healthySomewhere := newest[module]
		row.Drift, row.NoneYet = DriftMissing, !healthySomewhere
		return
	case !expected:
		row.Drift = DriftUnexpected
	}
	gen, seq := c.Generation, c.Seq
	row.Generation, row.Seq = &gen, &seq
	row.Commit, row.Digest, row.Plan = c.Commit, c.Digest, c.Plan
	row.State, row.Health, row.HealthySince, row.Restarts = c.State, c.Health, c.HealthySince, c.Restarts
	row.PutBack = c.Introduced != nil && c.Introduced.Revert && c.Introduced.Seq == c.Seq
	if row.Commit == "" && !row.PutBack {
		// Only the module's own plan pinned its build; another module's
		// plan kept whatever ran.
		if m, commit, ok := meshapi.ParsePlanID(c.Plan); ok && m == module {
			row.Commit = commit
		}
	}
	if n, ok := newest[module]; ok {
		behind := max(0, n-gen)
		row.Behind = &behind
	}
}

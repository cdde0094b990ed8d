package fleetui

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
	"github.com/meshroll/meshroll/internal/selector"
)

// A cell's state: what one module on one machine is, by the worst thing
// that is true of it (see cellStates). Frozen is not one of them: it is
// said beside the state, because a frozen machine is still healthy or
// behind, and the operator needs both.
const (
	stateUnknown  = "unknown"
	stateFailed   = "failed"
	stateRejected = "rejected"
	stateRolling  = "rolling"
	stateDrift    = "drift"
	stateBehind   = "behind"
	stateHealthy  = "healthy"
	// stateFrozen is a filter and a legend entry, shown as the cell's
	// outline.
	stateFrozen = "frozen"
	// stateNotHealthy filters machines with any cell not healthy.
	stateNotHealthy = "not-healthy"
)

// legendEntry is one state as the legend explains it.
type legendEntry struct {
	State, Meaning string
}

// legend is every state in the order a cell takes the first that is true
// of it.
var legend = []legendEntry{
	{stateUnknown, "the host did not answer: nothing is known of what it runs"},
	{stateFailed, "the container exited, crash-loops or fails its health check"},
	{stateRejected, "it runs a build an operator rejected (starter build reject)"},
	{stateRolling, "a push of this module to this machine is under way, or its container is starting"},
	{stateDrift, "the config and the host disagree: the module is missing (\"none yet\": no build of it runs healthy anywhere), or runs unexpected"},
	{stateBehind, "it runs an older build than the newest that runs healthy somewhere"},
	{stateHealthy, "it runs the newest healthy build, healthy"},
	{stateFrozen, "(outlined) a freeze holds this module's plans on this machine"},
}

// order ranks states, worst first, as legend lists them.
func order(state string) int {
	i := slices.IndexFunc(legend, func(e legendEntry) bool { return e.State == state })
	if i < 0 {
		return len(legend)
	}
	return i
}

// filterStates are the states a matrix filter takes.
var filterStates = []string{stateNotHealthy, stateUnknown, stateFailed, stateRejected, stateRolling, stateDrift, stateBehind, stateHealthy, stateFrozen}

// filter narrows the matrix, from the page's query: ?module=M (repeated),
// ?state=S, ?q=part-of-a-machine-name, ?selector=a-label-selector.
type filter struct {
	Modules []string
	State   string
	Query   string
	// Selector is the label selector as asked, sel as parsed (a selector
	// that does not parse is a note, and filters nothing).
	Selector string
	sel      selector.Selector
	// Notes say what was asked that could not be used.
	Notes []string
}

// parseFilter reads a filter from q, keeping only modules the fleet has
// and states the page knows.
func parseFilter(q url.Values, modules []string) filter {
	var f filter
	for _, m := range q["module"] {
		switch {
		case m == "":
		case slices.Contains(modules, m):
			if !slices.Contains(f.Modules, m) {
				f.Modules = append(f.Modules, m)
			}
		default:
			f.Notes = append(f.Notes, fmt.Sprintf("no module %q in this fleet; modules are %s", m, strings.Join(modules, ", ")))
		}
	}
	switch s := q.Get("state"); {
	case s == "":
	case slices.Contains(filterStates, s):
		f.State = s
	default:
		f.Notes = append(f.Notes, fmt.Sprintf("no state %q; states are %s", s, strings.Join(filterStates, ", ")))
	}
	f.Query = strings.TrimSpace(q.Get("q"))
	f.Selector = strings.TrimSpace(q.Get("selector"))
	if sel, err := selector.Parse(f.Selector); err != nil {
		f.Notes = append(f.Notes, err.Error()+`; write it as "ring=canary", "site in (fra1, ams2)", "gpu" or "!gpu"`)
	} else {
		f.sel = sel
	}
	return f
}

// active says whether anything narrows the matrix.
func (f filter) active() bool {
	return len(f.Modules) > 0 || f.State != "" || f.Query != "" || f.Selector != ""
}

// values is the filter as query parameters, for links that keep it.
func (f filter) values() url.Values {
	v := url.Values{}
	for _, m := range f.Modules {
		v.Add("module", m)
	}
	if f.State != "" {
		v.Set("state", f.State)
	}
	if f.Query != "" {
		v.Set("q", f.Query)
	}
	if f.Selector != "" {
		v.Set("selector", f.Selector)
	}
	return v
}

// with is the filter's link with state set to s ("" for any).
func (f filter) with(s string) string {
	v := f.values()
	if s == "" {
		v.Del("state")
	} else {
		v.Set("state", s)
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// matrixView is the fleet matrix: machines by tier (rows) × modules
// (columns).
type matrixView struct {
	Modules []moduleColumn
	Tiers   []tierView
	// Counts are the cells of the shown machines by state, in legend
	// order, with how many are frozen.
	Counts []stateCount
	// Machines and Shown count the fleet's machines and those the filter
	// keeps.
	Machines, Shown int
	Filter          filter
	AllModules      []string
	States          []string
}

type moduleColumn struct {
	Name string
	// NewestHealthy is the newest generation of the module some host
	// reports healthy; 0 when none does.
	NewestHealthy int64
}

type stateCount struct {
	State string
	N     int
	// Link is the matrix filtered to this state.
	Link string
}

// tierView is one tier's machines.
type tierView struct {
	Tier     int
	Machines []machineRow
	Counts   []stateCount
	// Total is the tier's machines before the filter.
	Total int
	// Open is whether the tier's table starts unfolded.
	Open bool
}

// machineRow is one machine of the matrix.
type machineRow struct {
	Name string
	// Worst is the worst state of its cells, for its dot in the tier's
	// strip.
	Worst     string
	HostError string
	// HostBadge is the word on a host that could not be read: "host?"
	// for one that failed, "stale" or "unknown" from the fleet picture.
	HostBadge string
	// Heard is how long ago the worker heard the host ("heard 3s ago"),
	// when the picture says; "" otherwise.
	Heard string
	// Labels are its labels, key=value joined by commas; "" for none.
	Labels string
	Queue  string
	Cells  []cell
}

// cell is one module on one machine.
type cell struct {
	Machine, Module string
	// On is whether the config gives the machine the module or its host
	// runs it; a cell that is neither is blank.
	On     bool
	State  string
	Frozen bool
	Gen    string
	Commit string
	Health string
	// Note is the one word under the build: behind by how much, which
	// drift, a failure.
	Note string
	// Title is the cell's detail on hover: digest, plan, sequence, why.
	Title string
	// States are every state true of it (State first), which a filter
	// matches on.
	States []string
}

// openTierMax is the most machines a tier's table shows unfolded when
// nothing filters the matrix: beyond it, the tier's strip of dots and
// counts say more at a glance.
const openTierMax = 60

// buildMatrix words a snapshot as the matrix f asks for.
func buildMatrix(s *Snapshot, modules []string, f filter) matrixView {
	st := s.Status
	v := matrixView{Filter: f, AllModules: modules, States: filterStates}
	cols := modules
	if len(f.Modules) > 0 {
		cols = f.Modules
	}
	for _, m := range cols {
		v.Modules = append(v.Modules, moduleColumn{Name: m, NewestHealthy: st.NewestHealthy[m]})
	}
	pushing := pushingNow(s)
	rows := map[string][]machines.StatusRow{}
	for _, r := range st.Rows {
		rows[r.Machine] = append(rows[r.Machine], r)
	}
	tiers := map[int]*tierView{}
	total := map[string]int{}
	for _, m := range st.Machines {
		v.Machines++
		t := tiers[m.Tier]
		if t == nil {
			t = &tierView{Tier: m.Tier}
			tiers[m.Tier] = t
		}
		t.Total++
		if f.Query != "" && !strings.Contains(strings.ToLower(m.Machine), strings.ToLower(f.Query)) || !f.sel.Matches(m.Labels) {
			continue
		}
		row := machineRow{Name: m.Machine, HostError: m.HostError, HostBadge: hostBadge(m), Queue: queueWords(m), Worst: stateHealthy}
		if m.HostHeardAt != nil {
			row.Heard = m.HostFreshness
		}
		if len(m.Labels) > 0 {
			row.Labels = config.LabelString(m.Labels)
		}
		var states []string
		any := false
		for _, col := range cols {
			c := cell{}
			if r, ok := findRow(rows[m.Machine], col); ok {
				c = makeCell(r, s.Rejected, pushing[m.Machine+"\x00"+col], m.Current)
				any = true
				states = append(states, c.States...)
				if order(c.State) < order(row.Worst) {
					row.Worst = c.State
				}
			}
			row.Cells = append(row.Cells, c)
		}
		if !any || !matches(f.State, states) {
			continue
		}
		v.Shown++
		t.Machines = append(t.Machines, row)
		for _, c := range row.Cells {
			if c.On {
				total[c.State]++
				if c.Frozen {
					total[stateFrozen]++
				}
			}
		}
	}
	for _, n := range slices.Sorted(maps.Keys(tiers)) {
		t := tiers[n]
		if len(t.Machines) == 0 {
			continue
		}
		counts := map[string]int{}
		for _, r := range t.Machines {
			for _, c := range r.Cells {
				if c.On {
					counts[c.State]++
					if c.Frozen {
						counts[stateFrozen]++
					}
				}
			}
		}
		t.Counts = countsOf(counts, f)
		t.Open = len(t.Machines) <= openTierMax || f.active()
		v.Tiers = append(v.Tiers, *t)
	}
	v.Counts = countsOf(total, f)
	return v
}

// countsOf lists the states counted, in legend order, each linking to the
// matrix filtered to it.
func countsOf(counts map[string]int, f filter) []stateCount {
	var out []stateCount
	for _, e := range legend {
		if n := counts[e.State]; n > 0 {
			out = append(out, stateCount{State: e.State, N: n, Link: f.with(e.State)})
		}
	}
	return out
}

// matches says whether a machine whose cells are in states passes a state
// filter.
func matches(want string, states []string) bool {
	switch want {
	case "":
		return true
	case stateNotHealthy:
		return slices.ContainsFunc(states, func(s string) bool { return s != stateHealthy && s != stateFrozen })
	}
	return slices.Contains(states, want)
}

func findRow(rows []machines.StatusRow, module string) (machines.StatusRow, bool) {
	for _, r := range rows {
		if r.Module == module {
			return r, true
		}
	}
	return machines.StatusRow{}, false
}

// pushingNow is, by machine and module ("machine\x00module"), the plan in
// flight pushing it now.
func pushingNow(s *Snapshot) map[string]string {
	out := map[string]string{}
	for _, p := range s.Plans {
		if p.State == nil {
			continue
		}
		for _, t := range p.State.Tiers {
			for _, m := range t.Machines {
				if m.State == meshapi.MachinePushing && !m.WaitingTurn() {
					out[m.Machine+"\x00"+p.State.Module] = p.Summary.Plan
				}
			}
		}
	}
	return out
}

// makeCell words one status row: its state, every state true of it, and
// what the cell says.
func makeCell(r machines.StatusRow, rejected map[string]mesh.Rejection, pushedBy string, current *meshapi.QueuedRequest) cell {
	c := cell{Machine: r.Machine, Module: r.Module, On: true, Frozen: r.Frozen, Commit: mesh.ShortCommit(r.Commit), Health: healthWords(r)}
	if r.Generation != nil {
		c.Gen = fmt.Sprint(*r.Generation)
	}
	title := []string{}
	if r.Digest != "" {
		title = append(title, "digest "+r.Digest)
	}
	if r.Plan != "" {
		seq := ""
		if r.Seq != nil {
			seq = fmt.Sprintf(" (sequence %d)", *r.Seq)
		}
		if r.PutBack {
			title = append(title, "put back on it by "+r.Plan+seq+" after that plan's build failed here")
		} else {
			title = append(title, "last declared by "+r.Plan+seq)
		}
	}
	var states []string
	add := func(s string) { states = append(states, s) }
	failedState := r.State == mesh.StateExited || r.State == mesh.StateCrashLooping || r.Health == mesh.HealthUnhealthy
	rolling := pushedBy != "" || r.State == mesh.StateStarting || (current != nil && current.Module == r.Module)
	switch {
	case r.HostError != "":
		add(stateUnknown)
		c.Note = "host?"
		title = append(title, r.HostError)
	default:
		if failedState {
			add(stateFailed)
			c.Note = r.State
			if r.Health == mesh.HealthUnhealthy {
				c.Note = "unhealthy"
			}
		}
		if rej, ok := rejected[r.Digest]; ok && r.Digest != "" {
			add(stateRejected)
			title = append(title, rej.String())
			if c.Note == "" {
				c.Note = "rejected"
			}
		}
		if rolling {
			add(stateRolling)
			switch {
			case pushedBy != "":
				title = append(title, "being pushed by "+pushedBy)
			case current != nil && current.Module == r.Module:
				title = append(title, fmt.Sprintf("being pushed by %s (generation %d)", current.Plan, current.Generation))
			}
			if c.Note == "" {
				c.Note = "rolling"
			}
		}
		if r.Drift != machines.DriftNone {
			add(stateDrift)
			if c.Note == "" {
				c.Note = r.Drift
			}
			if r.NoneYet && c.Note == r.Drift {
				c.Note = "none yet"
				title = append(title, "no build of "+r.Module+" runs healthy anywhere yet: never rolled out, or down everywhere")
			}
		}
		if r.Behind != nil && *r.Behind > 0 {
			add(stateBehind)
			title = append(title, fmt.Sprintf("%d behind the newest healthy build", *r.Behind))
			if c.Note == "" {
				c.Note = fmt.Sprintf("%d behind", *r.Behind)
			}
		}
		if len(states) == 0 {
			add(stateHealthy)
		}
	}
	if r.Frozen {
		add(stateFrozen)
		title = append(title, "frozen: a freeze holds this module's plans here")
	}
	c.States = states
	slices.SortStableFunc(c.States, func(a, b string) int { return cmp.Compare(order(a), order(b)) })
	c.State = c.States[0]
	c.Title = strings.Join(title, "\n")
	return c
}

// queueWords says what a machine's workflow is doing: "idle", "pushing
// host 27, 2 queued", "" when it has none or could not be asked.
func queueWords(m machines.Row) string {
	if m.Queue == nil {
		return ""
	}
	var parts []string
	if c := m.Current; c != nil {
		parts = append(parts, fmt.Sprintf("pushing %s %d", c.Module, c.Generation))
	}
	if *m.Queue > 0 {
		parts = append(parts, fmt.Sprintf("%d queued", *m.Queue))
	}
	if m.Rollbacks > 0 {
		parts = append(parts, fmt.Sprintf("%d rollback first in line", m.Rollbacks))
	}
	if len(parts) == 0 {
		return "idle"
	}
	return strings.Join(parts, ", ")
}

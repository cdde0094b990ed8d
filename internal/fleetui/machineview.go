package fleetui

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/machines"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Journal paging of a machine's page: a page shows journalPageSize
// entries; "why" reads back up to whyDepth entries for the declaration
// that introduced each container.
const (
	journalPageSize = 25
	whyDepth        = 200
)

// machineView is one machine's page: what runs and why, what its machine
// workflow is doing, the plans pushing it, and its journal.
type machineView struct {
	Name string
	Host string
	Tier int
	// Labels are the machine's labels, key=value joined by commas; ""
	// for none.
	Labels          string
	Modules         []string
	Seq             string
	ReportedMachine string
	HostError       string
	WorkflowError   string
	JournalError    string
	// LastDeclaration is the newest declaration the host applied, from its
	// journal: the plan that last declared the whole machine.
	LastDeclaration *journalRow
	Containers      []containerView
	Workflow        *machines.Workflow
	WorkflowLink    string
	Plans           []machinePlan
	Freezes         []mesh.Freeze
	Journal         []journalRow
	Pager           pager
	// Logs are the end of each module's output, the config's modules in
	// its order.
	Logs []moduleLog
}

// containerView is one running container and why it is there.
type containerView struct {
	Module string
	Gen    int64
	Commit string
	Digest string
	State  string
	Health string
	Since  string
	// Cell is the container's state in the matrix.
	Cell   cell
	HasRow bool
	// Introduced is the declaration that brought this build here, from
	// the journal; when the journal read does not reach back to it,
	// HostIntroduced is the host's own record of it, and without that
	// (an agent from before it kept one) BuiltBy names the merge that
	// built it.
	Introduced     *journalRow
	HostIntroduced *mesh.Introduction
	BuiltBy        string
	// Declared is the declaration that last named it (a later plan of
	// another module keeps it as it runs), with its sequence.
	Declared string
	Seq      uint64
}

// machinePlan is a plan in flight that pushes this machine.
type machinePlan struct {
	ID, Anchor, PlanState, State, Reason string
}

// journalRow is one journal entry as the page shows it.
type journalRow struct {
	Index   uint64
	Time    time.Time
	Outcome string
	Seq     uint64
	Plan    string
	// What is the plan in words: the merge, rollback or sync it is.
	What string
	// Builds are the containers named, "host 27".
	Builds []string
	// Flags say what was out of the ordinary: forced, a revert, a
	// rollback; Reason and Detail say why and what was refused.
	Flags  []string
	Reason string
	Detail string
}

// pager links the journal's pages. Newer is empty on the newest page,
// Older on the oldest.
type pager struct {
	Newest, Newer, Older string
	Before               uint64
}

// journalRowOf words an entry.
func journalRowOf(e machines.JournalEntry) journalRow {
	r := journalRow{Index: e.Index, Time: e.Time, Outcome: e.Outcome, Seq: e.Seq, Plan: e.Plan, Reason: e.Reason}
	if m, c, ok := meshapi.ParsePlanID(e.Plan); ok {
		r.What = "merge of " + m + " at " + mesh.ShortCommit(c)
	} else {
		r.What = planWhat(e.Plan, "", "")
	}
	for _, c := range e.Containers {
		r.Builds = append(r.Builds, fmt.Sprintf("%s %d", c.Module, c.Generation))
	}
	if e.Force {
		f := "forced"
		if e.ForcedPast != "" {
			f += " past " + e.ForcedPast
		}
		r.Flags = append(r.Flags, f)
	}
	if e.Revert {
		r.Flags = append(r.Flags, "revert")
	}
	if e.Rollback {
		r.Flags = append(r.Flags, "rollback")
	}
	var detail []string
	for _, s := range []string{e.Code, e.Message} {
		if s != "" {
			detail = append(detail, s)
		}
	}
	r.Detail = strings.Join(detail, ": ")
	return r
}

// introduced finds, in entries (newest first), the applied declaration
// that brought digest of module here: the oldest of the applied
// declarations, counted back from the newest, that all name it. false when
// the entries end before one that did not name it (the journal read does
// not reach back far enough) or none names it.
func introduced(entries []machines.JournalEntry, module, digest string, complete bool) (machines.JournalEntry, bool) {
	var found machines.JournalEntry
	seen := false
	for _, e := range entries {
		if e.Outcome != "applied" {
			continue
		}
		names := slices.ContainsFunc(e.Containers, func(c machines.JournalContainer) bool {
			return c.Module == module && c.Digest == digest
		})
		if !names {
			return found, seen
		}
		found, seen = e, true
	}
	// Every applied entry read names it: the first of them introduced it
	// only if nothing older exists.
	return found, seen && complete
}

// buildMachine words one machine's page.
func buildMachine(name string, d machines.Detail, why machines.JournalPage, page machines.JournalPage, before uint64, s *Snapshot) machineView {
	v := machineView{
		Name: name, Host: d.Host, Tier: d.Tier, Modules: d.Modules, ReportedMachine: d.ReportedMachine,
		HostError: d.HostError, WorkflowError: d.WorkflowError, Workflow: d.Workflow,
	}
	if d.Seq != nil {
		v.Seq = strconv.FormatUint(*d.Seq, 10)
	}
	if len(d.Labels) > 0 {
		v.Labels = config.LabelString(d.Labels)
	}
	rows := map[string]machines.StatusRow{}
	var current *meshapi.QueuedRequest
	pushing := map[string]string{}
	if s != nil {
		for _, r := range s.Status.Rows {
			if r.Machine == name {
				rows[r.Module] = r
			}
		}
		for _, m := range s.Status.Machines {
			if m.Machine == name {
				current = m.Current
			}
		}
		pushing = pushingNow(s)
		for _, p := range s.Plans {
			if p.State == nil {
				continue
			}
			if mp, ok := p.State.Machine(name); ok {
				v.Plans = append(v.Plans, machinePlan{ID: p.Summary.Plan, Anchor: anchor(p.Summary.Plan), PlanState: string(p.State.State), State: mp.StateWord(), Reason: mp.Reason})
			}
		}
		for _, f := range s.Freezes {
			if f.Machine == "" || f.Machine == name {
				v.Freezes = append(v.Freezes, f)
			}
		}
	}
	for _, e := range why.Entries {
		if e.Outcome == "applied" {
			r := journalRowOf(e)
			v.LastDeclaration = &r
			break
		}
	}
	for _, c := range d.Containers {
		cv := containerView{Module: c.Module, Gen: c.Generation, Commit: c.Commit, Digest: c.Digest, State: c.State, Since: c.Since, Declared: c.Plan, Seq: c.Seq}
		if r, ok := rows[c.Module]; ok && r.Digest == c.Digest {
			cv.Cell, cv.HasRow = makeCell(r, s.Rejected, pushing[name+"\x00"+c.Module], current), true
			cv.Health = r.Health
		}
		if e, ok := introduced(why.Entries, c.Module, c.Digest, why.NextBefore == 0); ok {
			r := journalRowOf(e)
			cv.Introduced = &r
		} else if c.Introduced != nil {
			cv.HostIntroduced = c.Introduced
		} else if c.Commit != "" {
			cv.BuiltBy = meshapi.PlanID(c.Module, c.Commit)
		}
		v.Containers = append(v.Containers, cv)
	}
	for _, e := range page.Entries {
		v.Journal = append(v.Journal, journalRowOf(e))
	}
	var newest uint64
	if len(why.Entries) > 0 {
		newest = why.Entries[0].Index
	}
	v.Pager = pagerOf(name, page, before, newest)
	return v
}

// pagerOf links the pages around one that started before entry index
// before (0: the newest), newest being the journal's newest entry (0 when
// unknown). Entry indexes are contiguous, so the page newer than this one
// starts journalPageSize above it, or is the newest page.
func pagerOf(name string, page machines.JournalPage, before, newest uint64) pager {
	base := "/machines/" + url.PathEscape(name)
	p := pager{Before: before}
	if before != 0 {
		p.Newest, p.Newer = base, base
		if newer := before + journalPageSize; newest == 0 || newer <= newest {
			p.Newer = base + "?before=" + strconv.FormatUint(newer, 10)
		}
	}
	if page.NextBefore != 0 {
		p.Older = base + "?before=" + strconv.FormatUint(page.NextBefore, 10)
	}
	return p
}

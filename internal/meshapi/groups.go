package meshapi

import "fmt"

// GroupCount is how a tier's group stands: its machines done (converged or
// superseded) and failed.
type GroupCount struct {
	Done   int `json:"done"`
	Failed int `json:"failed"`
	// FailedMachines names the failed ones, in the tier's order; none in
	// a summarised tier (TierSummary).
	FailedMachines []string `json:"failed_machines,omitempty"`
}

// GroupCounts counts the tier's machines by group (Group of each
// machine's progress), for every group of its policy. It walks the tier
// once: callers call it per batch or per view, never per answer.
func (t TierState) GroupCounts() map[string]*GroupCount {
	out := map[string]*GroupCount{}
	if t.Policy == nil {
		return out
	}
	for _, g := range t.Policy.Groups {
		out[g.Group] = &GroupCount{}
		if t.Summary != nil {
			c := t.Summary.Groups[g.Group]
			out[g.Group] = &c
		}
	}
	if t.Summary != nil {
		return out
	}
	for _, m := range t.Machines {
		c, ok := out[m.Group]
		if !ok {
			continue
		}
		switch m.State {
		case MachineConverged, MachineSuperseded:
			c.Done++
		case MachineFailed:
			c.Failed++
			c.FailedMachines = append(c.FailedMachines, m.Machine)
		}
	}
	return out
}

// GroupNotes is each group of a tier with group_by, in its policy's order:
// "site=fra1 2/5", with "1 failed of 1 allowed" added to a group that lost
// any; none for a tier without groups. The tier's Notes include them.
func (t TierState) GroupNotes() []string {
	if t.Policy == nil {
		return nil
	}
	counts := t.GroupCounts()
	notes := make([]string, 0, len(t.Policy.Groups))
	for _, g := range t.Policy.Groups {
		c := counts[g.Group]
		n := fmt.Sprintf("%s %d/%d", g.Group, c.Done, g.Machines)
		if c.Failed > 0 {
			n += fmt.Sprintf(" %d failed of %d allowed", c.Failed, g.MaxFailed)
		}
		notes = append(notes, n)
	}
	return notes
}

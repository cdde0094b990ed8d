package fleetui

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/machines"
)

// freshness is when the data was read, whether it is stale, and what
// could not be read.
type freshness struct {
	ReadAt       time.Time
	Took         time.Duration
	Age          time.Duration
	Stale        bool
	ReadingSince time.Time
	// WorkflowsFedAt is when the worker's feed read the machine
	// workflows shown (zero: they were listed by this read).
	WorkflowsFedAt time.Time
	// Problems are the sources that could not be read, each in a line.
	Problems []string
}

// staleAfter is the age past which a snapshot is called stale: a read that
// is due has not ended for a while.
func (s *Server) staleAfter(snap *Snapshot) time.Duration {
	return 2*s.cache.due(snap) + 5*time.Second
}

func (s *Server) freshness(snap *Snapshot, readingSince time.Time) freshness {
	now := s.o.Clock()
	f := freshness{ReadAt: snap.ReadAt, Took: snap.Took, Age: now.Sub(snap.ReadAt), ReadingSince: readingSince}
	f.Stale = f.Age > s.staleAfter(snap)
	if at := snap.Status.WorkflowsFedAt; at != nil {
		f.WorkflowsFedAt = *at
	}
	if snap.TemporalError != "" {
		f.Problems = append(f.Problems, "Temporal unreachable: "+snap.TemporalError+" — machine workflows' queues and plans are unknown; what the hosts said is shown.")
	}
	var down []string
	wfErr := 0
	for _, m := range snap.Status.Machines {
		if m.HostStatus != machines.HostOK {
			down = append(down, m.Machine+" ("+m.HostStatus+": "+m.HostError+")")
		}
		if m.WorkflowError != "" && snap.TemporalError == "" {
			wfErr++
		}
	}
	if n := len(down); n > 0 {
		shown := down[:min(n, 3)]
		line := fmt.Sprintf("%d %s did not answer: %s", n, plural(n, "host", "hosts"), strings.Join(shown, "; "))
		if n > len(shown) {
			line += fmt.Sprintf("; and %d more (filter the matrix by state unknown)", n-len(shown))
		}
		f.Problems = append(f.Problems, line+".")
	}
	switch common := machines.CommonWorkflowError(snap.Status.Machines); {
	case wfErr > 0 && common != "":
		f.Problems = append(f.Problems, "The machine workflows could not be read: "+common+" — their queues are unknown.")
	case wfErr > 0:
		f.Problems = append(f.Problems, fmt.Sprintf("%d machine %s did not answer their state query: their queues are unknown.", wfErr, plural(wfErr, "workflow", "workflows")))
	}
	if snap.FreezesError != "" {
		f.Problems = append(f.Problems, "The freezes could not be read: "+snap.FreezesError+" — whether a machine is frozen is unknown.")
	}
	if snap.RejectedError != "" {
		f.Problems = append(f.Problems, "The rejections could not be read: "+snap.RejectedError+".")
	}
	if snap.PlansError != "" && snap.TemporalError == "" {
		f.Problems = append(f.Problems, "The plans in flight could not be read: "+snap.PlansError+".")
	}
	return f
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

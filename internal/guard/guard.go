// Package guard decides, at the moment of sending, whether a declaration may
// go to a machine. It is pure: given the declaration a plan composed, the
// host's own report of what runs and a way to resolve digests to
// generations, it says send (possibly rebased), already running, superseded
// or refused. Keeping it free of I/O lets every rule of the no-downgrade
// invariant be tested as a table, and keeps the push activity a thin shell.
package guard

import (
	"fmt"
	"slices"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Decision is what the guard concluded.
type Decision string

// Decisions.
const (
	// Send: the (possibly rebased) declaration may be sent.
	Send Decision = "send"
	// AlreadyRunning: the machine already runs exactly this; nothing to send.
	AlreadyRunning Decision = "already-running"
	// Superseded: the machine runs a newer build of the plan's own module.
	Superseded Decision = "superseded"
	// Refused: the declaration cannot be sent safely (see Result.Reason and
	// Result.Code).
	Refused Decision = "refused"
)

// Lookup resolves a digest to the generation the catalogue knows for it.
// known is false for a digest the catalogue has never recorded.
type Lookup func(digest string) (generation int64, known bool, err error)

// Input is everything the guard looks at.
type Input struct {
	// Declaration is what the plan composed (Seq is ignored).
	Declaration mesh.Declaration
	// Module is the plan's own module, pinned to the plan's build.
	Module string
	// Report is the host's report, read just before sending.
	Report mesh.Report
	// Lookup resolves running digests.
	Lookup Lookup
	// Force lets an operator pass unknown running digests and lower
	// generations; the host journals it.
	Force bool
	// Floor is, per module, the newest container known to have been
	// healthy on this machine: from the machine workflow's own record and
	// the catalogue's, never from the host. It is what keeps a host that
	// lost its state (and reports less than ran there, or nothing) from
	// being taken below what the fleet knows ran.
	Floor map[string]mesh.Container
	// Rejected says whether an operator rejected a digest and, in words,
	// by whom and why ("rejected by alice at ...: reason"); nil when
	// nothing is rejected. A rejected digest is
	// never sent to a machine that does not run it already, forced or not:
	// a rejection stops a build spreading, while what runs is kept (it
	// never pushes anything by itself).
	Rejected func(digest string) (why string, rejected bool, err error)
	// Rollback is set for a rollback plan's push: the plan's own module
	// may go below what runs and below its floor, to the plan's build (the
	// one sanctioned downgrade), and a machine already at or below it is
	// left as it runs. Every other rule stands, rejection included.
	Rollback bool
	// RollbackFrom, with Rollback, is the digest a put-back takes the
	// machine off (a plan putting back a tier whose analysis failed): a
	// machine that runs anything else of the module now (a newer build
	// reached it since) is left as it runs.
	RollbackFrom string
	// Remove is set for a sync that stops the plan's module on the
	// machine (the config no longer gives it the module): what is sent is
	// the rest, kept by the same rules, without it.
	Remove bool
}

// Result is the guard's conclusion.
type Result struct {
	Decision Decision
	// Declaration is what to send when Decision is Send.
	Declaration mesh.Declaration
	// Rebased lists modules whose composed container differed from what the
	// machine runs now and was replaced by the running one, sorted.
	Rebased []string
	// Code is the refusal's stable error type (meshapi.ErrUnknownDigest,
	// ErrDowngradeRefused, ErrInvalidInput) when Decision is Refused.
	Code string
	// Reason says why, in words a person on call can act on.
	Reason string
}

// Check applies the rules:
//
//   - the plan's own module: if the machine runs a newer generation than the
//     plan's build, or its floor is newer, the plan is superseded there;
//   - every other module the machine runs stays exactly as it runs now (a
//     plan changes only its own module), so a stale composed copy is rebased
//     onto the running one; a module the machine does not run keeps the
//     composed container;
//   - a module whose floor is above both what runs and what was composed
//     (a host that lost its state) is rebased onto the floor's container;
//   - a running module the declaration does not name is kept, never dropped;
//   - then every container is compared again with the higher of what runs
//     and the floor: none may have a lower generation, and a running digest
//     the catalogue does not know is refused, unless forced;
//   - last, no container the machine does not run already may be of a
//     rejected build, forced or not.
//
// Two kinds of plan bend the rules for their own module only: a rollback
// may take it below what runs and below its floor (Rollback), and a sync
// that stops it sends the rest without it (Remove).
func Check(in Input) (Result, error) {
	d := in.Declaration
	pinned, ok := d.Container(in.Module)
	if !ok && !in.Remove { // a removal's composition may leave it out: it is dropped anyway
		return Result{Decision: Refused, Code: meshapi.ErrInvalidInput,
			Reason: fmt.Sprintf("declaration for %s does not contain the plan's module %s", d.Machine, in.Module)}, nil
	}

	running := map[string]mesh.RunningContainer{}
	gens := map[string]int64{}
	for _, r := range in.Report.Containers {
		running[r.Module] = r
		g, known, err := in.Lookup(r.Digest)
		if err != nil {
			return Result{}, fmt.Errorf("look up running digest of %s: %w", r.Module, err)
		}
		if !known {
			if in.Force {
				continue
			}
			return Result{Decision: Refused, Code: meshapi.ErrUnknownDigest,
				Reason: fmt.Sprintf("machine %s runs %s at digest %s, which the catalogue does not know; "+
					"if the catalogue was lost, starter catalogue rebuild restores it from what the hosts run; "+
					"otherwise an operator can replace it with a forced push (journalled by the host)", d.Machine, r.Module, r.Digest)}, nil
		}
		gens[r.Module] = g
	}

	if r, ok := running[in.Module]; in.Rollback && in.RollbackFrom != "" && (!ok || r.Digest != in.RollbackFrom) {
		return Result{Decision: Superseded,
			Reason: fmt.Sprintf("machine %s no longer runs %s %s, the build being put back; left as it runs",
				d.Machine, in.Module, mesh.ShortDigest(in.RollbackFrom))}, nil
	}
	if r, ok := running[in.Module]; ok && r.Digest != pinned.Digest && in.Rollback {
		if g, known := gens[in.Module]; known && g < pinned.Generation {
			return Result{Decision: Superseded,
				Reason: fmt.Sprintf("machine %s runs %s generation %d (%s), below the rollback's generation %d (%s); left as it runs",
					d.Machine, in.Module, g, r.Digest, pinned.Generation, pinned.Digest)}, nil
		}
	}
	if r, ok := running[in.Module]; ok && r.Digest != pinned.Digest && !in.Rollback && !in.Remove {
		if g, known := gens[in.Module]; known && g > pinned.Generation && !in.Force {
			return Result{Decision: Superseded,
				Reason: fmt.Sprintf("machine %s already runs %s generation %d (%s), newer than this plan's generation %d (%s)",
					d.Machine, in.Module, g, r.Digest, pinned.Generation, pinned.Digest)}, nil
		}
	}
	if f, ok := in.Floor[in.Module]; ok && f.Generation > pinned.Generation && !in.Force && !in.Rollback && !in.Remove {
		return Result{Decision: Superseded,
			Reason: fmt.Sprintf("%s generation %d (%s) has run healthy on machine %s, newer than this plan's generation %d (%s)",
				in.Module, f.Generation, f.Digest, d.Machine, pinned.Generation, pinned.Digest)}, nil
	}

	out := d
	out.Containers = make([]mesh.Container, 0, len(d.Containers)+len(running))
	var rebased []string
	declared := map[string]bool{}
	for _, c := range d.Containers {
		declared[c.Module] = true
		if in.Remove && c.Module == in.Module {
			continue
		}
		if r, ok := running[c.Module]; ok && c.Module != in.Module && r.Digest != c.Digest {
			nc := r.Declared()
			if g, known := gens[c.Module]; known {
				nc.Generation = g
			}
			c = nc
			rebased = append(rebased, c.Module)
		}
		out.Containers = append(out.Containers, c)
	}
	for _, r := range in.Report.Containers {
		if !declared[r.Module] && !(in.Remove && r.Module == in.Module) {
			nc := r.Declared()
			if g, known := gens[r.Module]; known {
				nc.Generation = g
			}
			out.Containers = append(out.Containers, nc)
		}
	}
	if !in.Force {
		for i, c := range out.Containers {
			// Below the floor even after rebasing: the host reports less
			// than ran here (it lost its state). What last ran healthy is
			// what it gets back.
			if f, ok := in.Floor[c.Module]; ok && c.Module != in.Module && f.Generation > c.Generation {
				out.Containers[i] = f
				if !slices.Contains(rebased, c.Module) {
					rebased = append(rebased, c.Module)
				}
			}
		}
	}
	slices.Sort(rebased)

	// Compare again: nothing below what runs or the floor, whatever the
	// path that got here.
	for _, c := range out.Containers {
		if in.Force {
			break
		}
		if in.Rollback && c.Module == in.Module {
			continue // the sanctioned downgrade
		}
		if r, ok := running[c.Module]; ok && r.Digest != c.Digest {
			if g, known := gens[c.Module]; known && c.Generation < g {
				return Result{Decision: Refused, Code: meshapi.ErrDowngradeRefused, Rebased: rebased,
					Reason: fmt.Sprintf("sending %s generation %d (%s) to %s would downgrade it from generation %d (%s)",
						c.Module, c.Generation, c.Digest, d.Machine, g, r.Digest)}, nil
			}
		}
		if f, ok := in.Floor[c.Module]; ok && c.Generation < f.Generation {
			return Result{Decision: Refused, Code: meshapi.ErrDowngradeRefused, Rebased: rebased,
				Reason: fmt.Sprintf("sending %s generation %d (%s) to %s would take it below its floor, generation %d (%s), which ran healthy there",
					c.Module, c.Generation, c.Digest, d.Machine, f.Generation, f.Digest)}, nil
		}
	}

	if why, err := rejectedToSend(in, out.Containers, running); err != nil || why != "" {
		if err != nil {
			return Result{}, err
		}
		return Result{Decision: Refused, Code: meshapi.ErrRejected, Rebased: rebased, Reason: why}, nil
	}

	if sameAsRunning(out.Containers, in.Report) {
		return Result{Decision: AlreadyRunning, Declaration: out, Rebased: rebased,
			Reason: fmt.Sprintf("machine %s already runs this declaration", d.Machine)}, nil
	}
	return Result{Decision: Send, Declaration: out, Rebased: rebased}, nil
}

// rejectedToSend says why one of cs, which the machine does not run with
// its digest yet, may not be sent ("" when none is rejected).
func rejectedToSend(in Input, cs []mesh.Container, running map[string]mesh.RunningContainer) (string, error) {
	if in.Rejected == nil {
		return "", nil
	}
	for _, c := range cs {
		if r, ok := running[c.Module]; ok && r.Digest == c.Digest {
			continue
		}
		why, rejected, err := in.Rejected(c.Digest)
		if err != nil {
			return "", fmt.Errorf("look up whether %s %s is rejected: %w", c.Module, c.Digest, err)
		}
		if rejected {
			return fmt.Sprintf("%s generation %d (%s) was %s; it is not sent to %s",
				c.Module, c.Generation, c.Digest, why, in.Declaration.Machine), nil
		}
	}
	return "", nil
}

// sameAsRunning reports whether every declared container runs with its
// digest and state running, and nothing else runs.
func sameAsRunning(cs []mesh.Container, rep mesh.Report) bool {
	if len(cs) != len(rep.Containers) {
		return false
	}
	for _, c := range cs {
		r, ok := rep.Running(c.Module)
		if !ok || r.Digest != c.Digest || r.State != mesh.StateRunning {
			return false
		}
	}
	return true
}

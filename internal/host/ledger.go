package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/meshroll/meshroll/internal/mesh"
)

// Mark is the container a floor was taken from: its generation is the floor,
// its digest is named when the floor refuses a declaration.
type Mark struct {
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
}

// Ledger is what a host agent remembers between declarations, and the rules it
// judges a new one by. The real agent persists it; hosttest keeps it in
// memory. It is plain data so that it can be journalled as JSON. A Ledger is
// not safe for concurrent use: the agent serialises declarations itself.
type Ledger struct {
	// Machine is the host's own name; declarations for any other machine are
	// refused.
	Machine string `json:"machine"`
	// LastSeq is the last sequence applied (0 before the first).
	LastSeq uint64 `json:"last_seq"`
	// Last is the last applied declaration, kept so that an exact repeat can
	// be told from a stale sender.
	Last *mesh.Declaration `json:"last,omitempty"`
	// Floor holds, per module, the container that last counted healthy: it
	// was healthy for its check's MinHealthy without a break (without a
	// check, or with MinHealthy 0: it reached running, or passed its first
	// probe). A declaration may not go below its generation without Force.
	// It is taken when a container proves itself, not when it is declared
	// or merely runs, so a new build that never comes up (crash-looping,
	// stuck starting, failing its probe) can be rolled back without Force.
	// A forced or rolled-back container that counts healthy lowers the
	// floor: the operator's decision then stands for later pushes.
	Floor map[string]Mark `json:"floor,omitempty"`
	// Introduced holds, per module of the last declaration, the
	// declaration that put its digest here, kept across declarations that
	// keep the digest: what the report gives as each container's
	// Introduced.
	Introduced map[string]Introduced `json:"introduced,omitempty"`
}

// Introduced is the declaration that put a module's digest on the machine.
type Introduced struct {
	Digest string `json:"digest"`
	mesh.Introduction
}

// Admit judges a declaration against the ledger and what the host reports
// running. It returns repeat=true for an exact repeat of the last applied
// declaration, which the agent must answer without applying anything; nil
// error otherwise means the agent should apply d and then call Record. Every
// refusal is a *Refusal.
//
// Checks run in order: invalid, sequence (and repeat), unpinned, downgrade,
// so a stale sender always learns it is stale first.
func (l *Ledger) Admit(running []mesh.RunningContainer, d mesh.Declaration) (repeat bool, err error) {
	if r := l.checkShape(d); r != nil {
		return false, r
	}
	if d.Seq <= l.LastSeq {
		if l.Last != nil && d.Seq == l.Last.Seq && SameDeclaration(*l.Last, d) {
			return true, nil
		}
		return false, l.refuse(CodeSequence, "declaration %d is at or below the last applied and is not an exact repeat of it", d.Seq)
	}
	if r := l.checkPinned(d); r != nil {
		return false, r
	}
	if r := l.checkFloor(running, d); r != nil {
		return false, r
	}
	return false, nil
}

// Record notes that d was applied. The floor is untouched: it moves only when
// a container counts healthy (Ran).
func (l *Ledger) Record(d mesh.Declaration) {
	c := CloneDeclaration(d)
	l.LastSeq = d.Seq
	l.Last = &c
	l.Introduced = introduce(l.Introduced, d)
}

// Found notes what an agent with no state found running for its machine
// (d, at sequence 0): what it keeps and reports until the first
// declaration, which is judged as any first one. No declaration the host
// knows of introduced it, and nothing raises the floor until a container
// counts healthy.
func (l *Ledger) Found(d mesh.Declaration) {
	c := CloneDeclaration(d)
	l.Last = &c
	l.Introduced = nil
}

// introduce is what introduced says after d is applied: a module d keeps at
// the digest it had keeps its introduction, any other module of d is
// introduced by d, and a module d leaves out is gone.
func introduce(introduced map[string]Introduced, d mesh.Declaration) map[string]Introduced {
	next := make(map[string]Introduced, len(d.Containers))
	for _, c := range d.Containers {
		if prev, ok := introduced[c.Module]; ok && prev.Digest == c.Digest {
			next[c.Module] = prev
			continue
		}
		next[c.Module] = Introduced{Digest: c.Digest, Introduction: mesh.Introduction{Plan: d.Plan, Seq: d.Seq, Revert: d.Revert}}
	}
	return next
}

// Ran notes that c counts healthy (see Floor), which sets its module's floor
// to c. The agent calls it once the container has been healthy for its
// MinHealthy, and journals that first.
func (l *Ledger) Ran(c mesh.RunningContainer) {
	if l.Floor == nil {
		l.Floor = make(map[string]Mark)
	}
	l.Floor[c.Module] = Mark{Digest: c.Digest, Generation: c.Generation}
}

// Report is the host's report with running as its containers; the ledger
// gives the machine, the last sequence and its request. The agent and the
// test host both answer with it, so that they answer in one shape and a
// field added to the report is filled in here, once. running becomes the
// report's; the report's containers are never null on the wire.
func (l *Ledger) Report(running []mesh.RunningContainer) mesh.Report {
	if running == nil {
		running = []mesh.RunningContainer{}
	}
	for i, c := range running {
		if in, ok := l.Introduced[c.Module]; ok && in.Digest == c.Digest {
			intro := in.Introduction
			running[i].Introduced = &intro
		}
	}
	rep := mesh.Report{Machine: l.Machine, LastSeq: l.LastSeq, Containers: running}
	if l.Last != nil {
		rep.LastRequest = l.Last.Request
	}
	return rep
}

func (l *Ledger) refuse(code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...), LastSeq: l.LastSeq}
}

func (l *Ledger) checkShape(d mesh.Declaration) *Refusal {
	if d.Machine != l.Machine {
		return l.refuse(CodeInvalid, "declaration for machine %q sent to host %q", d.Machine, l.Machine)
	}
	seen := make(map[string]bool, len(d.Containers))
	for _, c := range d.Containers {
		if err := mesh.ValidName("module", c.Module); err != nil {
			return l.refuse(CodeInvalid, "%v", err)
		}
		if seen[c.Module] {
			return l.refuse(CodeInvalid, "module %q declared twice", c.Module)
		}
		seen[c.Module] = true
		if err := checkHealth(c.Health); err != nil {
			return l.refuse(CodeInvalid, "module %s: health: %v", c.Module, err)
		}
		if !mesh.ValidNetwork(c.Network) {
			return l.refuse(CodeInvalid, "module %s: network %q: want %q or %q", c.Module, c.Network, mesh.NetworkHost, mesh.NetworkBridge)
		}
		if err := c.Settings.Validate(); err != nil {
			return l.refuse(CodeInvalid, "module %s: %s", c.Module, strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	return nil
}

// checkHealth refuses a check no agent could run as declared, so that a
// mistake in the mesh config is a refusal at the first push rather than a
// container that never counts healthy: more than one probe, a port outside
// 0-65535 (0 is mesh.PortAuto), an HTTP path that is not a path on the
// loopback host, an empty command, a negative time.
func checkHealth(h *mesh.Health) error {
	if h == nil {
		return nil
	}
	var errs []error
	probes := 0
	port := func(kind string, p int) {
		if p < 0 || p > 65535 {
			errs = append(errs, fmt.Errorf("%s port %d is not 0 (auto) to 65535", kind, p))
		}
	}
	if h.HTTP != nil {
		probes++
		port("http", h.HTTP.Port)
		if p := h.HTTP.Path; p != "" {
			if u, err := url.ParseRequestURI(p); err != nil || !strings.HasPrefix(p, "/") || u.Host != "" {
				errs = append(errs, fmt.Errorf("http path %q is not an absolute path like /healthz", p))
			}
		}
	}
	if h.TCP != nil {
		probes++
		port("tcp", h.TCP.Port)
	}
	if h.Exec != nil {
		probes++
		if len(h.Exec) == 0 || h.Exec[0] == "" {
			errs = append(errs, errors.New("exec names no command"))
		}
	}
	if probes > 1 {
		errs = append(errs, fmt.Errorf("%d probes declared; give one of http, tcp and exec, or none", probes))
	}
	for _, d := range []struct {
		name string
		ms   int64
	}{{"interval_ms", h.IntervalMS}, {"timeout_ms", h.TimeoutMS}, {"min_healthy_ms", h.MinHealthyMS}, {"deadline_ms", h.DeadlineMS}} {
		if d.ms < 0 {
			errs = append(errs, fmt.Errorf("%s %d is negative", d.name, d.ms))
		}
	}
	return errors.Join(errs...)
}

func (l *Ledger) checkPinned(d mesh.Declaration) *Refusal {
	for _, c := range d.Containers {
		if err := mesh.ValidDigest(c.Digest); err != nil {
			return l.refuse(CodeUnpinned, "module %s: %v", c.Module, err)
		}
		if c.Image == "" {
			continue
		}
		last := c.Image[strings.LastIndex(c.Image, "/")+1:]
		if strings.Contains(c.Image, "@") || strings.Contains(last, ":") {
			return l.refuse(CodeUnpinned, "module %s: image %q must name a repository only; the digest pins it", c.Module, c.Image)
		}
	}
	return nil
}

func (l *Ledger) checkFloor(running []mesh.RunningContainer, d mesh.Declaration) *Refusal {
	if d.Force || d.Rollback {
		return nil
	}
	if below := l.BelowFloor(running, d); below != nil {
		return l.refuse(CodeDowngrade, "%s; set force to go below the floor", strings.Join(below, "; "))
	}
	return nil
}

// BelowFloor says, a clause per container, where d goes below the floor the
// ledger and running hold for its module: the words of a downgrade
// refusal, and what a forced or rolled-back declaration is journalled as
// having gone past. Nil when d goes below no floor.
func (l *Ledger) BelowFloor(running []mesh.RunningContainer, d mesh.Declaration) []string {
	floor := make(map[string]Mark, len(l.Floor)+len(running))
	for m, f := range l.Floor {
		floor[m] = f
	}
	// A running container the ledger was never told about (an agent that
	// adopted what it found at start, or one whose rise it could not
	// journal) still holds the floor, unless it has a check: running proves
	// nothing then, and a build that runs but fails its probe must be
	// reverted without force. Its floor is the ledger's, once it counted.
	for _, rc := range running {
		if rc.State != mesh.StateRunning || rc.Check != nil {
			continue
		}
		if f, ok := floor[rc.Module]; !ok || rc.Generation > f.Generation {
			floor[rc.Module] = Mark{Digest: rc.Digest, Generation: rc.Generation}
		}
	}
	var below []string
	for _, c := range d.Containers {
		f, ok := floor[c.Module]
		if !ok || c.Generation >= f.Generation {
			continue
		}
		below = append(below, fmt.Sprintf("module %s: generation %d (%s) is below generation %d (%s), which has run here",
			c.Module, c.Generation, mesh.ShortDigest(c.Digest), f.Generation, mesh.ShortDigest(f.Digest)))
	}
	return below
}

// SameDeclaration reports whether a and b are the same declaration: equal
// canonical JSON, with container order and nil-versus-empty ignored. It is
// how a host recognises a retried push as the one it already applied.
func SameDeclaration(a, b mesh.Declaration) bool {
	ca, errA := canonical(a)
	cb, errB := canonical(b)
	return errA == nil && errB == nil && bytes.Equal(ca, cb)
}

func canonical(d mesh.Declaration) ([]byte, error) {
	d = CloneDeclaration(d)
	if d.Containers == nil {
		d.Containers = []mesh.Container{}
	}
	slices.SortFunc(d.Containers, func(a, b mesh.Container) int { return strings.Compare(a.Module, b.Module) })
	// encoding/json sorts map keys and omits empty Args/Env, so equal content
	// gives equal bytes.
	return json.Marshal(d)
}

// CloneDeclaration returns a deep copy of d, so that what a ledger or a test
// host keeps cannot be changed through the caller's slices and maps.
func CloneDeclaration(d mesh.Declaration) mesh.Declaration {
	if d.Containers != nil {
		cs := make([]mesh.Container, len(d.Containers))
		for i, c := range d.Containers {
			cs[i] = CloneContainer(c)
		}
		d.Containers = cs
	}
	return d
}

// CloneContainer returns a deep copy of c (its args, env, health check and volumes),
// for the same reason as CloneDeclaration: the agent and its runtimes keep
// containers while callers still hold them.
func CloneContainer(c mesh.Container) mesh.Container {
	c.Args = slices.Clone(c.Args)
	c.Env = maps.Clone(c.Env)
	c.Health = CloneHealth(c.Health)
	c.Settings = c.Settings.Clone()
	return c
}

// CloneHealth returns a deep copy of h (nil for nil).
func CloneHealth(h *mesh.Health) *mesh.Health {
	if h == nil {
		return nil
	}
	cp := h.Clone()
	return &cp
}

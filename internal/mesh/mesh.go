// Package mesh holds the values every part of meshroll speaks in: builds,
// containers, declarations and the host's report of what runs. They are plain
// data so that workflows, activities, the host API and the CLI agree on one
// shape, and so that a payload in a workflow history decodes the same way years
// later.
package mesh

import (
	"fmt"
	"regexp"
	"time"
)

// Build is a module built at a commit. Digests are not orderable, so the
// Generation (larger is newer, ordered by the commit's place on the main line)
// is what every comparison uses.
type Build struct {
	Module     string `json:"module"`
	Commit     string `json:"commit"`
	Digest     string `json:"digest"`
	Generation int64  `json:"generation"`
	// Image is the repository the digest lives in, without tag or digest
	// (for example "127.0.0.1:5000/meshroll/host"); empty when the builder
	// produced no image yet.
	Image string `json:"image,omitempty"`
}

// Ref is the pullable reference of the build: image@digest, or the bare
// digest when there is no repository.
func (b Build) Ref() string {
	if b.Image == "" {
		return b.Digest
	}
	return b.Image + "@" + b.Digest
}

// Container is one container of a declaration: which module, pinned by
// digest, and the settings it runs with. Generation travels with the digest
// so that the host can hold its own floor without a catalogue.
type Container struct {
	Module     string            `json:"module"`
	Digest     string            `json:"digest"`
	Generation int64             `json:"generation"`
	Commit     string            `json:"commit,omitempty"`
	Image      string            `json:"image,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	// Health is how the host judges the container healthy; nil judges it
	// healthy once it runs.
	Health *Health `json:"health,omitempty"`
	// Network is the network the container joins: NetworkHost, or
	// NetworkBridge with its probe port published on 127.0.0.1; empty is
	// the runtime's own default (bridge on docker; exec runs processes on
	// the host, and refuses bridge). Part of the spec, so a change
	// recreates the container.
	Network string `json:"network,omitempty"`
	// Settings are its volumes, limits, user and stop grace; part of the
	// spec too.
	Settings
}

// Networks a container can join (Container.Network).
const (
	// NetworkHost shares the machine's network: the container listens on
	// the machine's addresses, as a process of the exec runtime does, and
	// needs no bridge (machines that allow loopback traffic only have
	// none).
	NetworkHost = "host"
	// NetworkBridge gives the container an address of its own on the
	// engine's bridge, its probe port published on 127.0.0.1.
	NetworkBridge = "bridge"
)

// ValidNetwork reports whether n is a Container.Network meshroll knows:
// host, bridge, or empty for the runtime's own.
func ValidNetwork(n string) bool {
	return n == "" || n == NetworkHost || n == NetworkBridge
}

// Declaration is what one machine should run. Seq only grows; the host
// refuses a Seq at or below the last it applied, except an exact repeat of the
// last. Plan and Request say who asked, so the host's journal can answer
// "which plan put this here".
type Declaration struct {
	Machine string `json:"machine"`
	Seq     uint64 `json:"seq"`
	// Plan is the plan workflow's ID.
	Plan string `json:"plan"`
	// Request identifies the push request within the machine workflow; a
	// retried push carries the same Request, which is how a retry after a
	// lost answer recognises its own declaration in the host's report.
	Request string `json:"request"`
	// Force lets an operator push below the host's floor or with a digest the
	// catalogue does not know; the host journals it.
	Force bool `json:"force,omitempty"`
	// Revert marks a declaration that puts the machine back on what it ran
	// before Plan, whose build failed there. Reason says why a declaration
	// is not an ordinary push: how the build failed (a revert), or that the
	// host had lost its state. The host journals both, so its journal
	// answers why a machine went back, or why it starts anew.
	Revert bool `json:"revert,omitempty"`
	// Rollback marks the one downgrade below a host's floor meshroll
	// sanctions: an operator's rollback plan (Plan names it; Reason says
	// who asked and why). The host lets it below its floor, journals it as
	// a rollback, and its floor follows once the container counts healthy.
	Rollback   bool        `json:"rollback,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	Containers []Container `json:"containers"`
}

// Container returns the declaration's container for module, if any.
func (d Declaration) Container(module string) (Container, bool) {
	for _, c := range d.Containers {
		if c.Module == module {
			return c, true
		}
	}
	return Container{}, false
}

// Container states a host reports.
const (
	StateStarting     = "starting"
	StateRunning      = "running"
	StateExited       = "exited"
	StateCrashLooping = "crash-looping"
)

// RunningContainer is one container as the host reports it.
type RunningContainer struct {
	Module string `json:"module"`
	Digest string `json:"digest"`
	// Generation is what the host was told when the container was declared.
	// meshroll compares against the catalogue's generation for Digest, not
	// this field, so a host cannot talk a push into a downgrade.
	Generation int64 `json:"generation"`
	// Plan and Seq are the last declaration, which names every container
	// of the machine: another module's plan keeps this one as it runs.
	Plan  string `json:"plan,omitempty"`
	Seq   uint64 `json:"seq"`
	State string `json:"state"`
	Since string `json:"since,omitempty"`
	// Introduced is the declaration that put this digest here: the plan
	// that brought the build, where Plan may name a later one that only
	// kept it. Nil from an agent that does not say; new in the v1 API.
	Introduced *Introduction `json:"introduced,omitempty"`
	// Reason says why the container is not running, as its runtime tells
	// it: why it exited or crash-loops, or why it has not started yet (a
	// pull it retries). Empty while it runs; new in the v1 API.
	Reason string `json:"reason,omitempty"`
	// The settings it was declared with, so that a push can keep a
	// container exactly as the machine runs it.
	Commit string            `json:"commit,omitempty"`
	Image  string            `json:"image,omitempty"`
	Args   []string          `json:"args,omitempty"`
	Env    map[string]string `json:"env,omitempty"`
	// Check is the Health it was declared with.
	Check *Health `json:"check,omitempty"`
	// Network is the Network it was declared with.
	Network string `json:"network,omitempty"`
	// Settings are the Settings it was declared with.
	Settings

	// What the host judges of it (all new in the v1 API; an agent that
	// does not judge health leaves them empty, which reads as unknown).

	// Health is HealthUnknown, HealthHealthy or HealthUnhealthy.
	Health string `json:"health,omitempty"`
	// HealthySince is when it last became healthy (RFC 3339), empty
	// while it is not.
	HealthySince string `json:"healthy_since,omitempty"`
	// Restarts counts how often the runtime restarted it since it was
	// declared.
	Restarts int `json:"restarts,omitempty"`
	// LastProbe is its last probe's outcome.
	LastProbe *ProbeResult `json:"last_probe,omitempty"`
}

// Healthy reports whether the host judges the container healthy, or, on a
// host that does not judge health (Health empty), whether it runs: the one
// reading of "runs healthy" that the starter's status and the worker's
// build list share, so that they never disagree about a machine.
func (r RunningContainer) Healthy() bool {
	return r.Health == HealthHealthy || (r.Health == "" && r.State == StateRunning)
}

// Declared is the container as it would be declared to keep it running as
// it runs now.
func (r RunningContainer) Declared() Container {
	return Container{
		Module:     r.Module,
		Digest:     r.Digest,
		Generation: r.Generation,
		Commit:     r.Commit,
		Image:      r.Image,
		Args:       r.Args,
		Env:        r.Env,
		Health:     r.Check,
		Network:    r.Network,
		Settings:   r.Settings,
	}
}

// Introduction is the declaration that first put a container's digest on
// a machine, so that "which plan brought this build here" has an answer
// after other modules' plans have pushed the machine again.
type Introduction struct {
	Plan string `json:"plan"`
	Seq  uint64 `json:"seq"`
	// Revert marks a declaration that put the machine back on this build
	// after Plan's build failed there: Plan is the plan that failed, not
	// the one that first brought the build.
	Revert bool `json:"revert,omitempty"`
}

// BroughtBy says which plan brought a container's build, and at which
// sequence, for a person: in, worded so that a revert does not read as the
// failed plan bringing the build; or, when the host does not say (in is
// nil, an agent from before it kept one), the last declaration's plan and
// sequence, with said false so the caller can say so.
func BroughtBy(in *Introduction, lastPlan string, lastSeq uint64) (plan string, seq uint64, said bool) {
	switch {
	case in == nil:
		return lastPlan, lastSeq, false
	case in.Revert:
		return in.Plan + " (put back after it failed)", in.Seq, true
	}
	return in.Plan, in.Seq, true
}

// Report is the host's own account of what runs on the machine.
type Report struct {
	Machine string `json:"machine"`
	// LastSeq is the last declaration sequence the host applied.
	LastSeq uint64 `json:"last_seq"`
	// LastRequest is the Request of the declaration applied at LastSeq.
	LastRequest string             `json:"last_request,omitempty"`
	Containers  []RunningContainer `json:"containers"`
}

// Running returns the reported container for module, if any.
func (r Report) Running(module string) (RunningContainer, bool) {
	for _, c := range r.Containers {
		if c.Module == module {
			return c, true
		}
	}
	return RunningContainer{}, false
}

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	nameRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62}[a-z0-9])?$`)
	commitRE = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
)

// ValidDigest reports whether s is a sha256 manifest digest.
func ValidDigest(s string) error {
	if !digestRE.MatchString(s) {
		return fmt.Errorf("digest %q is not sha256:<64 lowercase hex>", s)
	}
	return nil
}

// ValidName checks a module or machine name: lowercase letters, digits, '.',
// '_' and '-', at most 64 characters, no path separators, so that names are
// safe in workflow IDs, file names and URLs.
func ValidName(kind, s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%s name %q must be 1-64 of [a-z0-9._-], starting and ending with a letter or digit", kind, s)
	}
	return nil
}

// ValidCommit checks a git commit id. Only full ids are accepted: a plan's ID
// is made from the commit, and a short and a long spelling of one merge must
// never make two plans.
func ValidCommit(s string) error {
	if !commitRE.MatchString(s) {
		return fmt.Errorf("commit %q is not a full commit id (40 or 64 lowercase hex digits); pass the merge commit's full id", s)
	}
	return nil
}

// Rejection is an operator's word that a build must never be sent again:
// it crashed an hour after its health checks passed, or a rollback moved
// the fleet off it. It is kept beside the build in the catalogue, so that
// every push, whoever started it, refuses the build; what already runs it
// keeps running it until a newer build or a rollback replaces it.
type Rejection struct {
	Module string `json:"module"`
	Commit string `json:"commit"`
	Digest string `json:"digest"`
	// By is who rejected it: an operator's name, or the rollback plan
	// that moved the fleet off it.
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// String says who rejected the build, when and why, for a refusal's reason.
func (r Rejection) String() string {
	return fmt.Sprintf("rejected by %s at %s: %s", r.By, r.At.UTC().Format(time.RFC3339), r.Reason)
}

// Freeze is an operator's hold on roll-outs: while it is active, plans it
// applies to wait before their next tier or batch. An empty Module or
// Machine means every module or every machine, so a freeze with both empty
// holds the whole mesh. It lives here, beside Rejection, because the
// catalogue keeps it and the plan's hold check reports it.
type Freeze struct {
	// ID tells freezes apart in lists and audits; the catalogue assigns it.
	ID      int64     `json:"id"`
	Module  string    `json:"module,omitempty"`
	Machine string    `json:"machine,omitempty"`
	By      string    `json:"by"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
	// LiftedBy and LiftedAt are set once the freeze is lifted; lifted
	// freezes are kept for audit, never deleted.
	LiftedBy string     `json:"lifted_by,omitempty"`
	LiftedAt *time.Time `json:"lifted_at,omitempty"`
}

// Scope names what the freeze holds, in words, for lists and logs: "the
// whole mesh", "module host", "machine edge-1", "module host on machine
// edge-1".
func (f Freeze) Scope() string {
	switch {
	case f.Module == "" && f.Machine == "":
		return "the whole mesh"
	case f.Machine == "":
		return "module " + f.Module
	case f.Module == "":
		return "machine " + f.Machine
	}
	return fmt.Sprintf("module %s on machine %s", f.Module, f.Machine)
}

// String is the freeze as a held plan shows it: "freeze by alice: reason".
func (f Freeze) String() string {
	by := f.By
	if by == "" {
		by = "someone"
	}
	return fmt.Sprintf("freeze by %s: %s", by, f.Reason)
}

// Holds is whether the freeze applies to a plan of module that pushes
// machines: it does when its module is empty or module, and its machine is
// empty or one of machines.
func (f Freeze) Holds(module string, machines []string) bool {
	if f.Module != "" && f.Module != module {
		return false
	}
	if f.Machine == "" {
		return true
	}
	for _, m := range machines {
		if m == f.Machine {
			return true
		}
	}
	return false
}

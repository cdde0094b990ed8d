package meshapi

import (
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// TargetsInput asks the worker's mesh config which machines run a module.
type TargetsInput struct {
	Module string `json:"module"`
	// Remove names the one machine of a sync that stops the module there
	// (the config no longer gives it the module, so it is not among the
	// module's machines).
	Remove string `json:"remove,omitempty"`
}

// TargetsResult lists them sorted by tier, then name, with each tier's
// policy (a tier without one is pushed all at once, no failure allowed).
type TargetsResult struct {
	Targets []Target     `json:"targets"`
	Tiers   []TierPolicy `json:"tiers,omitempty"`
	// RelayAbove is push.relay_above when the plan was started: it hears
	// its answers through relays if it has more machines. 0 (a plan
	// started before the setting) means meshapi.RelayAbove.
	RelayAbove int `json:"relay_above,omitempty"`
	// RehandAfter is push.rehand_after when the plan was started: how long
	// a tier waits hearing no answer before it hands its unanswered pushes
	// again. 0 means meshapi.RehandAfter.
	RehandAfter time.Duration `json:"rehand_after,omitempty"`
	// HandWindow is push.hand_window when the plan was started: the most
	// of a tier's pushes handed over and not yet answered at once. 0
	// means meshapi.HandWindow.
	HandWindow int `json:"hand_window,omitempty"`
	// Notify says the worker has notify targets: the plan hands its
	// events to them (see the Notify activity). False for a plan started
	// before notifications, which never sends any.
	Notify bool `json:"notify,omitempty"`
	// Refused is why the worker's mesh config cannot give the plan its
	// targets (an unknown module, a machine a sync cannot remove, too
	// many machines): the plan ends refused with these words, and with
	// Notify its targets hear it. An older worker failed the activity
	// instead, and no target heard of it.
	Refused string `json:"refused,omitempty"`
}

// Relayed says whether a plan of n machines hears its answers through
// relays, given its targets' RelayAbove.
func Relayed(n, above int) bool {
	if above <= 0 {
		above = RelayAbove
	}
	return n > above
}

// RehandAfter is how long a plan's tier waits, by default, hearing no
// answer from its machines, before it hands the unanswered pushes to their
// machine workflows again. A machine workflow terminated by hand takes the
// requests it held with it; handed again, a request starts its successor,
// which pushes it. A machine workflow still holding a request drops the
// copy, and one that answered it answers again, so handing again is safe;
// it costs the plan an activity and each machine one signal, which is why
// it waits this long, and twice as long after each quiet hand-over, up to
// RehandAtMost: a machine may wait in line for hours behind other plans.
const (
	RehandAfter  = 10 * time.Minute
	RehandAtMost = time.Hour
)

// Rehand is how long a tier waits before its first hand-over again, given
// its targets' RehandAfter.
func Rehand(after time.Duration) time.Duration {
	if after <= 0 {
		return RehandAfter
	}
	return after
}

// HandWindow is how many of a batch's pushes a plan has handed over and
// not yet answered at most, by default: a larger batch is handed over as
// answers make room. Thousands of machine workflows woken at once cost
// the Temporal server and the worker more per push than the same pushes
// spread out, and their tasks wait out the worker's sticky queue: a
// 10,000-machine plan in tiers of 3,333 took 364 and 400 s handed over
// 1,000 at a time, 473 and 541 s all at once, its next plan 336 and 356 s
// against 394 and 398 s (docs/benchmarks.md, "Handing a large tier over
// in windows"). Pacing changes when a machine's push is handed over,
// never whether: every machine of a batch is pushed.
const HandWindow = 1000

// Window is how many pushes a batch has handed over and unanswered at
// most, given its targets' HandWindow.
func Window(n int) int {
	if n <= 0 {
		return HandWindow
	}
	return n
}

// BuildInput builds a module at a commit.
type BuildInput struct {
	Plan   string `json:"plan"`
	Module string `json:"module"`
	Commit string `json:"commit"`
}

// ComposeResult is what the plan intends for one machine.
type ComposeResult struct {
	Declaration mesh.Declaration `json:"declaration"`
	// Unknown names running digests the catalogue does not know; their
	// containers carry generation 0 and the push refuses them unless forced.
	Unknown []string `json:"unknown,omitempty"`
}

// HandPushesInput hands a tier's requests to their machine workflows.
type HandPushesInput struct {
	Requests []PushRequest `json:"requests"`
}

// HandPushesResult says how many were handed over.
type HandPushesResult struct {
	Enqueued int `json:"enqueued"`
}

// BakeInput watches a tier's machines, healthy on the plan's build, for the
// tier's bake before the next tier starts.
type BakeInput struct {
	Plan     string        `json:"plan"`
	Tier     int           `json:"tier"`
	Machines []string      `json:"machines"`
	Build    mesh.Build    `json:"build"`
	Bake     time.Duration `json:"bake"`
}

// BakeResult says the tier stayed healthy through its bake. A machine that
// did not fails the bake with ErrUnhealthy, named in the failure.
type BakeResult struct {
	Machines int `json:"machines"`
}

// Package catalogue is the store of builds: which digests exist for each
// module, their generations, which have converged on some machine, and which
// an operator rejected. The push path asks it to turn a running digest into a
// generation, because digests are not orderable and a host's own claim is not
// trusted, and whether a digest was rejected, because a rejected build must
// never be sent again.
//
// A rejection is recorded per build (module and commit) but judged per digest:
// reproducible builds can give several commits one digest, and the bits are
// what is bad. It only ever narrows what may be sent: the answers that
// choose a build to send or to hold a machine at (NewestConverged,
// NewestHealthyBelow, and NewestConvergedOn, a machine's floor) skip it,
// while Lookup, Newest and Build still find it. A rejection moves no machine
// by itself: what runs a rejected build keeps running it until a newer build
// or a rollback replaces it.
//
// Catalogue is the contract; Memory and File are the in-process
// implementations (File, a Memory kept in one JSON file, is for a single
// worker), and catalogue/sqlcat keeps it in SQLite or PostgreSQL behind the
// same interface. catalogue/catalogtest is the conformance suite every
// implementation passes.
//
// Builds and rejections are only ever added, never changed or removed (a fix
// is a new build), which is what lets every implementation answer a retried
// or concurrent call by what it finds stored.
//
// Host states (HostState) are the fleet's picture of what every host
// reports, kept current by the worker's watcher; unlike builds they are
// replaced as hosts change, newest revision first.
//
// Freezes are an operator's holds on roll-outs (see Freeze). They are kept
// here, beside the builds, because every worker must see them and they must
// survive a restart; a lifted freeze is marked lifted, by whom and when, and
// kept for audit.
package catalogue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// ErrNotReproducible is returned by Record when a module's commit was already
// recorded with another digest: the build is not reproducible, and no retry
// of it will agree with the first.
var ErrNotReproducible = errors.New("the build is not reproducible")

// ErrUnknownBuild is returned (wrapped, naming the module and commit) by
// Reject for a build the catalogue never recorded, so that an operator's typo
// is told apart from a store that failed.
var ErrUnknownBuild = errors.New("the build is not in the catalogue")

// ErrAmbiguousCommit is returned (wrapped, naming the candidates) by Build
// when a commit prefix begins more than one of the module's recorded commits:
// picking one would act on a build the operator may not have meant.
var ErrAmbiguousCommit = errors.New("the commit prefix names more than one build")

// MinCommitPrefix is the fewest hex digits Build takes as a commit prefix:
// git's own short form, and enough that a prefix rarely names two builds.
const MinCommitPrefix = 7

// Catalogue records builds and answers for them. Implementations are safe
// for concurrent use, and for concurrent use by several workers where the
// store is shared: recording the same build twice (a retried build
// activity, two workers) records it once, and rejecting it twice keeps one
// rejection.
type Catalogue interface {
	// Record adds a build made by a plan; recording the same module and
	// commit again with the same digest is a no-op, with another digest an
	// error (the build is not reproducible).
	Record(ctx context.Context, b mesh.Build, plan string) error
	// Lookup returns the build a digest belongs to. When reproducible builds
	// gave several commits one digest, it returns the highest generation, so
	// that what runs is never judged older than it is. A rejected build is
	// found like any other: what runs must still be judged by its generation.
	Lookup(ctx context.Context, digest string) (mesh.Build, bool, error)
	// Build returns the module's build at commit, so that an operator's
	// --commit can be checked and completed. commit is a full commit as
	// recorded or a prefix of at least MinCommitPrefix hex digits (any case);
	// a prefix that begins several of the module's commits is an error
	// wrapping ErrAmbiguousCommit that names them, a shorter one that names
	// no commit exactly is an error saying so. false when no build matches.
	Build(ctx context.Context, module, commit string) (mesh.Build, bool, error)
	// Newest returns the module's build with the highest generation,
	// rejected or not: it answers what exists, not what may be sent.
	Newest(ctx context.Context, module string) (mesh.Build, bool, error)
	// NewestConverged returns the module's newest build that some machine
	// has reported running and that is not rejected (by its digest, see
	// Rejected). It is what a composition gives a machine that lacks the
	// module, so a rejected build must never be the answer.
	NewestConverged(ctx context.Context, module string) (mesh.Build, bool, error)
	// NewestConvergedOn returns the module's build with the highest
	// generation that was marked converged on machine; false when none was.
	// It is the machine's floor as the catalogue keeps it: the push asks it
	// before sending, so that a host that lost its own state (a replaced
	// disk, a re-imaged machine) and comes back empty is still not taken
	// below what the fleet knows ran there. Convergence is per digest, so
	// when reproducible builds gave several commits one digest it answers,
	// as Lookup does, with the highest generation among them. It skips
	// rejected builds: a build the fleet decided never to send again is not
	// one to hold a machine at (a host that lost its state is lifted to the
	// newest build that ran there and was not rejected), and after a
	// rollback the floor follows the fleet down to the rollback's target.
	NewestConvergedOn(ctx context.Context, module, machine string) (mesh.Build, bool, error)
	// NewestHealthyBelow returns the module's highest-generation build below
	// generation that some machine reported running and that is not
	// rejected: the default target of a roll-back from the build at
	// generation. false when there is none.
	NewestHealthyBelow(ctx context.Context, module string, generation int64) (mesh.Build, bool, error)
	// MarkConverged notes that a machine reported the build running.
	MarkConverged(ctx context.Context, digest, machine string) error
	// Reject records that the module's build at commit (a full commit, as
	// Build returns it) must not be sent again, by whom and why. The build
	// must be recorded, else the error wraps ErrUnknownBuild; reason must
	// not be blank. Rejecting a build already rejected keeps the first
	// rejection and returns it, so that a retried activity, or two operators
	// at once, record one rejection. It returns the rejection as stored.
	Reject(ctx context.Context, module, commit, by, reason string) (Rejection, error)
	// Rejected answers whether digest is rejected: it is when any build
	// with that digest is (reproducible builds can give several commits one
	// digest, and the bits are what is bad). It returns the earliest such
	// rejection.
	Rejected(ctx context.Context, digest string) (Rejection, bool, error)
	// Builds lists a module's builds, newest first, at most limit (0: all).
	Builds(ctx context.Context, module string, limit int) ([]Entry, error)
	// Freeze records an active freeze of module on machine ("" for either:
	// every module, every machine), by whom and why, and returns it as
	// stored, with its ID. reason must not be blank. Freezing a scope that
	// is frozen already adds another freeze: each is an operator's act with
	// its own reason, and unfreezing the scope lifts them all.
	Freeze(ctx context.Context, module, machine, by, reason string) (Freeze, error)
	// Unfreeze lifts every active freeze whose scope is exactly module and
	// machine (a freeze of the whole mesh is not lifted by unfreezing one
	// module), marking each lifted by by, now, and returns those it lifted,
	// oldest first; none is not an error (a retried call finds them lifted).
	Unfreeze(ctx context.Context, module, machine, by string) ([]Freeze, error)
	// Freezes lists the active freezes, oldest first.
	Freezes(ctx context.Context) ([]Freeze, error)

	// RecordHostReport records rep, at revision rev, as machine's newest
	// report, heard at at, unless a newer one is stored: the stored one is
	// replaced when rev is above its revision, or rev is 0 (a host that
	// does not long-poll), or none is stored; an error older than at is
	// cleared. It answers whether it wrote, so that several watchers of
	// one host (worker replicas) leave the newest revision whatever their
	// order.
	RecordHostReport(ctx context.Context, machine string, rep mesh.Report, rev uint64, at time.Time) (bool, error)
	// HostsHeard moves the heard time of every machine of machines that
	// has a report to at (never back) and clears errors older than at: one
	// write for every host a watcher heard answer unchanged.
	HostsHeard(ctx context.Context, machines []string, at time.Time) error
	// RecordHostError records why machine could not be asked at at,
	// keeping since when it has failed; an error no newer than the last
	// time the host was heard is dropped (another watcher heard it since).
	RecordHostError(ctx context.Context, machine, msg string, at time.Time) error
	// HostStates is the whole picture, by machine: one read for any
	// number of hosts.
	HostStates(ctx context.Context) ([]HostState, error)
	// KeepMachineFeed keeps the worker's feed of the machine workflows'
	// summaries (package machinefeed, whose JSON body is opaque here) as
	// of asOf; a nil body moves asOf alone, and does nothing while none
	// is kept. Each worker keeps its own feed here, and an asOf older than
	// the one kept is dropped.
	KeepMachineFeed(ctx context.Context, asOf time.Time, body []byte) error
	// MachineFeed is the feed kept last; ok is false when none is.
	MachineFeed(ctx context.Context) (asOf time.Time, body []byte, ok bool, err error)
}

// Freeze is mesh.Freeze: kept by the catalogue so that every worker holds
// the plans it applies to, and reported by the plan's hold check.
type Freeze = mesh.Freeze

// Entry is one build with what the catalogue knows about it.
type Entry struct {
	Build     mesh.Build `json:"build"`
	Plan      string     `json:"plan,omitempty"`
	BuiltAt   time.Time  `json:"built_at"`
	Converged []string   `json:"converged,omitempty"`
	// Rejected is, from Builds, the earliest rejection of the build's digest
	// as Rejected answers it: the build's own, or another commit's that
	// built the same bits (its Commit says which); nil when the digest may
	// be sent. An operator listing builds sees what the guard will refuse.
	Rejected *Rejection `json:"rejected,omitempty"`
}

// Rejection is mesh.Rejection: the catalogue keeps it beside the build so
// that every worker, and every later plan, refuses the build, and so that
// the list of builds can say who rejected it and why.
type Rejection = mesh.Rejection

// CommitPrefix returns commit as the prefix Build matches against recorded
// commits once no commit equals it: lower-cased hex of at least
// MinCommitPrefix digits. ok is false when commit is not hex (no prefix of a
// commit; look it up exactly only), err set when it is hex but too short to
// name a build safely (callers add which module and commit). Implementations share it so that every catalogue takes
// the same short forms.
func CommitPrefix(commit string) (prefix string, ok bool, err error) {
	lower := strings.ToLower(commit)
	if lower == "" || strings.Trim(lower, "0123456789abcdef") != "" {
		return "", false, nil
	}
	if len(lower) < MinCommitPrefix {
		return "", false, fmt.Errorf("a commit prefix needs at least %d hex digits", MinCommitPrefix)
	}
	return lower, true, nil
}

// AmbiguousCommit is the error Build returns when prefix begins several of
// module's commits, naming each (newest first, as candidates come) so that
// the operator can pick one. It wraps ErrAmbiguousCommit.
func AmbiguousCommit(module, prefix string, candidates []mesh.Build) error {
	names := make([]string, 0, len(candidates))
	for _, b := range candidates {
		names = append(names, fmt.Sprintf("%s (generation %d)", b.Commit, b.Generation))
	}
	return fmt.Errorf("find build of %s at %s: %w: %s", module, prefix, ErrAmbiguousCommit, strings.Join(names, ", "))
}

// ValidReason checks the reason given to Reject: a rejection without one
// would leave the next operator guessing why a build may not be sent.
func ValidReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return errors.New("a rejection needs a reason")
	}
	return nil
}

// ValidFreezeReason checks the reason given to Freeze: a freeze without one
// leaves everyone whose plan it holds guessing why.
func ValidFreezeReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return errors.New("a freeze needs a reason")
	}
	return nil
}

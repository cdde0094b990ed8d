package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
)

// Options configures Open.
type Options struct {
	// Machine is the machine this agent answers for; declarations for any
	// other machine are refused, and a state directory written for another
	// machine is not opened.
	Machine string
	// StateDir holds the journal and the checkpoint. It is created if
	// missing.
	StateDir string
	// Runtime runs the declared containers.
	Runtime Runtime
	// Log receives one line per apply, refusal and container transition.
	Log zerolog.Logger

	// crash, in tests, stops the agent as a killed process would at the
	// named point (see the crash* constants) when it returns true.
	crash func(point string) bool
	// observed, in tests, is called after the agent took an update in.
	observed func(Update)
}

// Points at which a test can make the agent stop as if killed.
const (
	// crashJournalWrite: part of a journal line is written, nothing synced.
	crashJournalWrite = "journal-write"
	// crashAfterJournal: the applied entry is synced, the checkpoint is
	// not written, nothing is answered.
	crashAfterJournal = "after-journal"
	// crashAfterCheckpoint: everything is durable, the runtime was not told
	// and nothing is answered.
	crashAfterCheckpoint = "after-checkpoint"
)

// errCrashed is what a stopped (test-crashed) agent answers with.
var errCrashed = errors.New("agent stopped (simulated crash); restart it on the same state directory")

// ErrClosed is returned by an agent after Close.
var ErrClosed = errors.New("agent closed")

// Agent is a machine's host agent: the only place a machine's declarations
// are judged, recorded and handed to a runtime. It implements host.Client,
// so host.NewHandler (or NewHandler, which adds the journal) serves it.
// All methods are safe for concurrent use; declarations are applied one at
// a time.
type Agent struct {
	machine  string
	dir      string
	rt       Runtime
	log      zerolog.Logger
	crash    func(string) bool
	observed func(Update)
	release  func() error
	metrics  *agentMetrics

	// applyMu orders declarations end to end, the runtime's Apply included,
	// so the runtime sees declarations in the order they were recorded. It
	// is taken before mu and never while holding it.
	applyMu sync.Mutex

	mu         sync.Mutex
	ledger     host.Ledger
	containers []mesh.RunningContainer // sorted by module
	journal    *journal
	// checkpointed is the journal index ledger.json reflects.
	checkpointed uint64
	// epoch counts hand-overs to the runtime; updates from an older one
	// are stale.
	epoch  uint64
	closed bool
	dead   bool
	// broken is set when the journal could not be cut back after a failed
	// append: the agent no longer knows what its journal says.
	broken error
}

var _ host.Client = (*Agent)(nil)

// Open starts an agent on its state directory: it takes the directory's
// lock, reads the checkpoint, checks the journal (dropping a torn last line),
// rolls the checkpoint forward over any journal entries it lacks and hands
// the current declaration to the runtime again. The agent so picks up where
// it stopped, whether it was stopped or killed.
func Open(ctx context.Context, o Options) (_ *Agent, err error) {
	if err := mesh.ValidName("machine", o.Machine); err != nil {
		return nil, fmt.Errorf("open agent: %w", err)
	}
	if o.StateDir == "" {
		return nil, errors.New("open agent: no state directory")
	}
	if o.Runtime == nil {
		return nil, errors.New("open agent: no runtime")
	}
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("open agent: %w", err)
	}
	release, err := lockDir(filepath.Join(o.StateDir, lockFile))
	if err != nil {
		return nil, fmt.Errorf("open agent: %w", err)
	}
	defer func() {
		if err != nil {
			_ = release()
		}
	}()

	cp, had, err := readCheckpoint(o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("open agent: %w", err)
	}
	if !had {
		cp = checkpoint{Version: checkpointVersion, Ledger: host.Ledger{Machine: o.Machine}}
	}
	if cp.Ledger.Machine != o.Machine {
		return nil, fmt.Errorf("open agent: state directory %s belongs to machine %q, not %q", o.StateDir, cp.Ledger.Machine, o.Machine)
	}
	if err := os.Remove(filepath.Join(o.StateDir, LedgerFile+".tmp")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open agent: %w", err)
	}
	j, replay, dropped, err := openJournal(filepath.Join(o.StateDir, JournalFile), cp.JournalIndex)
	if err != nil {
		return nil, fmt.Errorf("open agent: %w", err)
	}
	defer func() {
		if err != nil {
			_ = j.close()
		}
	}()
	if n := uint64(len(j.offs)); cp.JournalIndex > n {
		return nil, fmt.Errorf("open agent: %s reflects journal entry %d but %s holds only %d entries; the journal was cut or replaced", LedgerFile, cp.JournalIndex, JournalFile, n)
	}
	if err := syncDir(o.StateDir); err != nil {
		return nil, fmt.Errorf("open agent: %w", err)
	}

	a := &Agent{
		machine: o.Machine, dir: o.StateDir, rt: o.Runtime, log: o.Log,
		crash: o.crash, observed: o.observed, release: release, metrics: newAgentMetrics(),
		ledger: cp.Ledger, journal: j, checkpointed: cp.JournalIndex,
	}
	if dropped > 0 {
		a.log.Warn().Int64("bytes", dropped).Uint64("entry", j.next()).
			Msg("dropped a torn journal line: the agent stopped while writing it, before it was answered")
	}
	a.mu.Lock()
	for _, e := range replay {
		a.replayLocked(e)
	}
	// The containers are the last declaration's; whatever they did before
	// the restart, they start again now.
	a.containers = nil
	if a.ledger.Last != nil {
		a.containers = declared(*a.ledger.Last, nil, now())
	}
	if len(replay) > 0 {
		a.log.Info().Int("entries", len(replay)).Uint64("last_seq", a.ledger.LastSeq).
			Msg("rolled the checkpoint forward over journal entries it lacked")
		if err := a.checkpointLocked(); err != nil {
			a.mu.Unlock()
			return nil, fmt.Errorf("open agent: %w", err)
		}
	}
	a.epoch++
	epoch, specs := a.epoch, a.specsLocked()
	lastSeq, entries := a.ledger.LastSeq, len(j.offs)
	a.mu.Unlock()

	a.log.Info().Str("machine", a.machine).Str("runtime", a.rt.Name()).Uint64("last_seq", lastSeq).
		Int("journal_entries", entries).Int("containers", len(specs)).Msg("host agent state loaded")
	a.applyMu.Lock()
	a.handToRuntime(ctx, epoch, specs)
	a.applyMu.Unlock()
	return a, nil
}

// Ready reports why the agent cannot take a declaration now (closed,
// stopped, or its journal could not be written), or nil: the readiness
// probe (/readyz).
func (a *Agent) Ready() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writableLocked()
}

// Runtime is the name of the runtime the agent runs containers with.
func (a *Agent) Runtime() string { return a.rt.Name() }

// Machine is the machine the agent answers for.
func (a *Agent) Machine() string { return a.machine }

// Report is the agent's account of what runs: the last applied sequence and
// request and every declared container with its state.
func (a *Agent) Report(ctx context.Context) (mesh.Report, error) {
	if err := ctx.Err(); err != nil {
		return mesh.Report{}, fmt.Errorf("report: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.readableLocked(); err != nil {
		return mesh.Report{}, err
	}
	running := make([]mesh.RunningContainer, 0, len(a.containers))
	for _, rc := range a.containers {
		running = append(running, cloneRunning(rc))
	}
	return a.ledger.Report(running), nil
}

// Apply judges d by the ledger's rules and journals the verdict before it
// answers. An accepted declaration is answered once its journal entry is
// synced and the checkpoint written; the runtime then starts its containers
// and the report shows them starting, then running. Refusals are
// *host.Refusal; any other error means the agent could not record what it
// did, and the caller should treat the host as unreachable (and read the
// report, which is the truth).
func (a *Agent) Apply(ctx context.Context, d mesh.Declaration) (res host.ApplyResult, err error) {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	start := time.Now()
	defer func() {
		var r *host.Refusal
		switch {
		case errors.As(err, &r):
			a.metrics.counted(start, OutcomeRefused, r.Code)
		case err != nil:
			a.metrics.counted(start, applyError, "")
		case res.Repeat:
			a.metrics.counted(start, OutcomeRepeat, "")
		default:
			a.metrics.counted(start, OutcomeApplied, "")
		}
	}()
	d = host.CloneDeclaration(d)

	a.mu.Lock()
	if err := a.writableLocked(); err != nil {
		a.mu.Unlock()
		return host.ApplyResult{}, err
	}
	repeat, err := a.ledger.Admit(a.containers, d)
	if err != nil {
		defer a.mu.Unlock()
		return host.ApplyResult{}, a.refuseLocked(d, err)
	}
	if repeat {
		defer a.mu.Unlock()
		e := entryFor(d, OutcomeRepeat)
		if err := a.appendLocked(&e); err != nil {
			return host.ApplyResult{}, fmt.Errorf("journal repeat of declaration %d: %w", d.Seq, err)
		}
		a.log.Info().Uint64("seq", d.Seq).Str("plan", d.Plan).Str("request", d.Request).
			Msg("declaration repeated; acknowledged without applying")
		return host.ApplyResult{Seq: d.Seq, Repeat: true}, nil
	}

	e := entryFor(d, OutcomeApplied)
	if d.Force {
		unforced := d
		unforced.Force = false
		var r *host.Refusal
		if _, ferr := a.ledger.Admit(a.containers, unforced); errors.As(ferr, &r) && r.Code == host.CodeDowngrade {
			e.ForcedPast = r.Message
		}
	}
	if err := a.appendLocked(&e); err != nil {
		a.mu.Unlock()
		return host.ApplyResult{}, fmt.Errorf("record declaration %d: %w", d.Seq, err)
	}
	// The synced entry is the commit point: from here the declaration
	// stands, whatever fails next.
	if a.crashedAt(crashAfterJournal) {
		a.mu.Unlock()
		return host.ApplyResult{}, errCrashed
	}
	a.ledger.Record(d)
	a.containers = declared(d, a.containers, now())
	cerr := a.checkpointLocked()
	if a.crashedAt(crashAfterCheckpoint) {
		a.mu.Unlock()
		return host.ApplyResult{}, errCrashed
	}
	a.epoch++
	epoch, specs := a.epoch, a.specsLocked()
	a.mu.Unlock()

	ev := a.log.Info()
	if d.Force {
		ev = a.log.Warn().Bool("force", true).Str("forced_past", e.ForcedPast)
	}
	ev.Uint64("seq", d.Seq).Str("plan", d.Plan).Str("request", d.Request).Strs("digests", digests(d)).
		Uint64("journal_index", e.Index).Msg("declaration applied")

	a.handToRuntime(context.WithoutCancel(ctx), epoch, specs)
	if cerr != nil {
		a.log.Error().Err(cerr).Uint64("seq", d.Seq).Msg("declaration journalled but checkpoint failed")
		return host.ApplyResult{}, fmt.Errorf("declaration %d is journalled and stands (the report shows it), but writing the checkpoint failed: %w", d.Seq, cerr)
	}
	return host.ApplyResult{Seq: d.Seq}, nil
}

// refuseLocked journals a refusal and returns it, or an internal error if it
// could not be journalled: nothing is answered that the journal lacks.
func (a *Agent) refuseLocked(d mesh.Declaration, err error) error {
	var r *host.Refusal
	if !errors.As(err, &r) {
		return fmt.Errorf("judge declaration %d: %w", d.Seq, err)
	}
	e := entryFor(d, OutcomeRefused)
	e.Code, e.Message = r.Code, r.Message
	if jerr := a.appendLocked(&e); jerr != nil {
		return fmt.Errorf("journal refusal of declaration %d: %w", d.Seq, jerr)
	}
	a.log.Warn().Uint64("seq", d.Seq).Str("plan", d.Plan).Str("request", d.Request).Str("code", r.Code).
		Str("reason", r.Message).Uint64("last_seq", r.LastSeq).Msg("declaration refused")
	return r
}

// handToRuntime gives the runtime the containers of hand-over epoch. A
// runtime that cannot take them leaves them exited, journalled with why.
func (a *Agent) handToRuntime(ctx context.Context, epoch uint64, specs []mesh.Container) {
	err := a.rt.Apply(ctx, specs, a.updater(epoch))
	if err == nil {
		return
	}
	a.log.Error().Err(err).Str("runtime", a.rt.Name()).Msg("runtime could not take the declaration")
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.epoch != epoch || a.readableLocked() != nil {
		return
	}
	ts := now()
	for i := range a.containers {
		a.containers[i].State, a.containers[i].Since = mesh.StateExited, ts
	}
	e := Entry{Outcome: OutcomeRuntimeFailed, Message: err.Error(), Machine: a.machine, Seq: a.ledger.LastSeq, Containers: specs}
	if a.ledger.Last != nil {
		e.Plan, e.Request, e.Merge = a.ledger.Last.Plan, a.ledger.Last.Request, mergeOf(a.ledger.Last.Plan)
	}
	if jerr := a.appendLocked(&e); jerr != nil {
		a.log.Error().Err(jerr).Msg("could not journal the runtime's failure")
		return
	}
	if cerr := a.checkpointLocked(); cerr != nil {
		a.log.Error().Err(cerr).Msg("checkpoint failed")
	}
}

// updater is the runtime's callback for hand-over epoch.
func (a *Agent) updater(epoch uint64) func(Update) {
	return func(u Update) {
		a.mu.Lock()
		took := a.observeLocked(epoch, u)
		a.mu.Unlock()
		if took && a.observed != nil {
			a.observed(u)
		}
	}
}

// observeLocked takes a container's new state in. Reaching running is
// journalled and only then raises the floor (host.Ledger.Ran); failing is
// journalled; starting is only reported.
func (a *Agent) observeLocked(epoch uint64, u Update) bool {
	if a.epoch != epoch || a.readableLocked() != nil {
		return false
	}
	i := slices.IndexFunc(a.containers, func(rc mesh.RunningContainer) bool { return rc.Module == u.Module })
	if i < 0 {
		return false
	}
	rc := &a.containers[i]
	since := now()
	if !u.Since.IsZero() {
		since = u.Since.UTC().Format(time.RFC3339Nano)
	}
	if u.State == mesh.StateStarting && u.Reason != "" {
		// Not started yet, and the runtime says why (a pull it will retry):
		// logged, not journalled, since nothing changed state.
		a.log.Warn().Str("module", rc.Module).Str("digest", rc.Digest).Uint64("seq", rc.Seq).
			Str("reason", u.Reason).Msg("container not started yet")
	}
	if rc.State == u.State {
		return true
	}
	rc.State, rc.Since = u.State, since
	var outcome string
	switch u.State {
	case mesh.StateRunning:
		outcome = OutcomeRunning
	case mesh.StateCrashLooping:
		outcome = OutcomeCrashLooping
	case mesh.StateExited:
		outcome = OutcomeExited
	default:
		return true
	}
	e := Entry{
		Outcome: outcome, Message: u.Reason, Machine: a.machine, Seq: rc.Seq, Plan: rc.Plan,
		Merge: mergeOf(rc.Plan), Containers: []mesh.Container{rc.Declared()},
	}
	if a.ledger.Last != nil {
		e.Request = a.ledger.Last.Request
	}
	if err := a.appendLocked(&e); err != nil {
		// Unjournalled, so the floor stays; the running container still
		// holds it through the report while it runs.
		a.log.Error().Err(err).Str("module", rc.Module).Str("state", u.State).Msg("could not journal a container's transition")
		return true
	}
	ev := a.log.Info()
	if outcome == OutcomeRunning {
		a.ledger.Ran(*rc)
	} else {
		ev = a.log.Warn().Str("reason", u.Reason)
	}
	ev.Str("module", rc.Module).Str("digest", rc.Digest).Int64("generation", rc.Generation).
		Uint64("seq", rc.Seq).Str("state", u.State).Msg("container " + u.State)
	if err := a.checkpointLocked(); err != nil {
		a.log.Error().Err(err).Msg("checkpoint failed")
	}
	return true
}

// replayLocked redoes what a journal entry the checkpoint lacks did to the
// ledger, exactly as Apply and observeLocked did it when it was written.
func (a *Agent) replayLocked(e Entry) {
	switch e.Outcome {
	case OutcomeApplied:
		a.ledger.Record(declarationOf(e))
	case OutcomeRunning:
		for _, c := range e.Containers {
			a.ledger.Ran(mesh.RunningContainer{Module: c.Module, Digest: c.Digest, Generation: c.Generation})
		}
	}
}

// appendLocked fills in what every entry carries and journals e.
func (a *Agent) appendLocked(e *Entry) error {
	e.Time = time.Now().UTC()
	e.Runtime = a.rt.Name()
	e.LastSeq = a.ledger.LastSeq
	if e.Outcome == OutcomeApplied {
		e.LastSeq = e.Seq
	}
	broken, err := a.journal.append(e, a.crash)
	switch {
	case errors.Is(err, errCrashed):
		a.dead = true
	case broken:
		a.broken = err
		a.log.Error().Err(err).Msg("journal is in an unknown state; refusing declarations until restarted")
	}
	return err
}

// checkpointLocked writes ledger.json as of the journal's last entry.
func (a *Agent) checkpointLocked() error {
	cp := checkpoint{
		Version:      checkpointVersion,
		JournalIndex: uint64(len(a.journal.offs)),
		Written:      time.Now().UTC(),
		Ledger:       a.ledger,
		Containers:   a.containers,
	}
	if cp.Containers == nil {
		cp.Containers = []mesh.RunningContainer{}
	}
	if err := writeCheckpoint(a.dir, cp); err != nil {
		return err
	}
	a.checkpointed = cp.JournalIndex
	return nil
}

// crashedAt stops the agent, as a kill would, if the test hook says so.
func (a *Agent) crashedAt(point string) bool {
	if a.crash != nil && a.crash(point) {
		a.dead = true
		return true
	}
	return false
}

func (a *Agent) readableLocked() error {
	switch {
	case a.dead:
		return errCrashed
	case a.closed:
		return ErrClosed
	}
	return nil
}

func (a *Agent) writableLocked() error {
	if err := a.readableLocked(); err != nil {
		return err
	}
	if a.broken != nil {
		return fmt.Errorf("agent takes no declaration until restarted, since its journal could not be written: %w", a.broken)
	}
	return nil
}

func (a *Agent) specsLocked() []mesh.Container {
	out := make([]mesh.Container, len(a.containers))
	for i, rc := range a.containers {
		out[i] = cloneRunning(rc).Declared()
	}
	return out
}

// Close stops the runtime and releases the state directory. Everything
// durable is already on disk; Close only retries a checkpoint that failed.
func (a *Agent) Close(ctx context.Context) error {
	a.applyMu.Lock()
	defer a.applyMu.Unlock()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	wasDead := a.dead
	a.closed = true
	a.mu.Unlock()

	rerr := a.rt.Close(ctx)
	if rerr != nil {
		rerr = fmt.Errorf("close runtime: %w", rerr)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var cerr error
	if !wasDead && a.broken == nil && a.checkpointed < uint64(len(a.journal.offs)) {
		cerr = a.checkpointLocked()
	}
	jerr := a.journal.close()
	if jerr != nil {
		jerr = fmt.Errorf("close journal: %w", jerr)
	}
	lerr := a.release()
	if lerr != nil {
		lerr = fmt.Errorf("unlock state directory: %w", lerr)
	}
	return errors.Join(rerr, cerr, jerr, lerr)
}

// declared is the report's view of d just applied: every container starting,
// except one declared exactly as it already runs, which keeps running.
func declared(d mesh.Declaration, prev []mesh.RunningContainer, ts string) []mesh.RunningContainer {
	out := make([]mesh.RunningContainer, 0, len(d.Containers))
	for _, c := range d.Containers {
		rc := mesh.RunningContainer{
			Module: c.Module, Digest: c.Digest, Generation: c.Generation,
			Plan: d.Plan, Seq: d.Seq, State: mesh.StateStarting, Since: ts,
			Commit: c.Commit, Image: c.Image, Args: slices.Clone(c.Args), Env: maps.Clone(c.Env),
		}
		if i := slices.IndexFunc(prev, func(p mesh.RunningContainer) bool { return p.Module == c.Module }); i >= 0 &&
			prev[i].State == mesh.StateRunning && sameSpec(prev[i].Declared(), c) {
			rc.State, rc.Since = mesh.StateRunning, prev[i].Since
		}
		out = append(out, rc)
	}
	slices.SortFunc(out, func(x, y mesh.RunningContainer) int { return strings.Compare(x.Module, y.Module) })
	return out
}

func cloneRunning(rc mesh.RunningContainer) mesh.RunningContainer {
	rc.Args = slices.Clone(rc.Args)
	rc.Env = maps.Clone(rc.Env)
	return rc
}

func digests(d mesh.Declaration) []string {
	out := make([]string, len(d.Containers))
	for i, c := range d.Containers {
		out[i] = c.Module + "=" + c.Digest
	}
	return out
}

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

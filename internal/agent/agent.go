package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/meshroll/meshroll/internal/host"
	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/statedir"
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
	// Ports is where the agent picks the ports of mesh.PortAuto probes;
	// zero means DefaultPorts.
	Ports PortRange

	// crash, in tests, stops the agent as a killed process would at the
	// named point (see the crash* constants) when it returns true.
	crash func(point string) bool
	// observed, in tests, is called after the agent took an update in.
	observed func(Update)
	// clock, in tests, replaces the wall clock for probe intervals and
	// min_healthy.
	clock clock
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
	clock    clock
	ports    PortRange
	// probers counts the probe goroutines, so that Close outlives them.
	probers sync.WaitGroup

	// applyMu orders declarations end to end, the runtime's Apply included,
	// so the runtime sees declarations in the order they were recorded. It
	// is taken before mu and never while holding it.
	applyMu sync.Mutex

	mu         sync.Mutex
	ledger     host.Ledger
	containers []mesh.RunningContainer // sorted by module
	// watches are the containers' ports and health judging, by module.
	watches map[string]*watch
	// revision is the report's (see host.HeaderReportRevision); changed
	// is closed, and replaced, when it moves on.
	revision uint64
	changed  chan struct{}
	journal  *journal
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
	// resume is, by module, the health the last agent recorded for a
	// container that may have outlived it (resume.go).
	resume map[string]resumeMark
}

var (
	_ host.Client       = (*Agent)(nil)
	_ host.ReportWaiter = (*Agent)(nil)
)

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
	release, err := statedir.Lock(filepath.Join(o.StateDir, lockFile))
	if errors.Is(err, statedir.ErrLocked) {
		return nil, fmt.Errorf("open agent: state directory %s is in use by another agent: stop it, or pass another state directory: %w", o.StateDir, err)
	}
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
	if err := statedir.Sync(o.StateDir); err != nil {
		return nil, fmt.Errorf("open agent: %w", err)
	}

	a := &Agent{
		machine: o.Machine, dir: o.StateDir, rt: o.Runtime, log: o.Log,
		crash: o.crash, observed: o.observed, release: release, metrics: newAgentMetrics(), clock: o.clock,
		ports:  cmp.Or(o.Ports, DefaultPorts),
		ledger: cp.Ledger, journal: j, checkpointed: cp.JournalIndex,
		// From the wall clock, so that a restarted agent's revisions do not
		// repeat the last one's and a waiter from before is answered at once.
		revision: uint64(time.Now().UnixNano()), changed: make(chan struct{}),
	}
	if a.clock == nil {
		a.clock = realClock{}
	}
	if dropped > 0 {
		a.log.Warn().Int64("bytes", dropped).Uint64("entry", j.next()).
			Msg("dropped a torn journal line: the agent stopped while writing it, before it was answered")
	}
	var found []mesh.Container
	if !had && len(j.offs) == 0 {
		found = findLeftRunning(ctx, o.Runtime, a.log)
	}
	a.mu.Lock()
	for _, e := range replay {
		a.replayLocked(e)
	}
	if len(found) > 0 {
		if err = a.keepFoundLocked(found); err != nil {
			a.mu.Unlock()
			return nil, fmt.Errorf("open agent: %w", err)
		}
	}
	// The containers are the last declaration's; whatever they did before
	// the restart, they start again now.
	a.containers = nil
	if a.ledger.Last != nil {
		if a.watches, err = watchesFor(*a.ledger.Last, nil, keptPorts(cp.Ports, replay), a.ports); err != nil {
			a.mu.Unlock()
			return nil, fmt.Errorf("open agent: %w", err)
		}
		a.containers = declared(*a.ledger.Last, nil, now())
		if _, outlives := o.Runtime.(Finder); outlives {
			a.resume = resumable(cp.Containers, replay)
			a.log.Info().Int("containers", len(a.resume)).Msg("containers the last agent saw healthy, to confirm")
		}
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
	a.awaitResumed(ctx)
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
// request and every declared container with its state and health.
func (a *Agent) Report(ctx context.Context) (mesh.Report, error) {
	rep, _, err := a.WaitReport(ctx, 0, 0)
	return rep, err
}

// WaitReport is the report long-polled (host.ReportWaiter), so that a
// machine workflow waiting for a container to count healthy hears of every
// change at once without polling: it answers when the report's revision is
// not after, or once it changes, or once wait (at most host.MaxReportWait)
// has passed.
func (a *Agent) WaitReport(ctx context.Context, after uint64, wait time.Duration) (mesh.Report, uint64, error) {
	var expired <-chan time.Time
	if after != 0 && wait > 0 {
		t := time.NewTimer(min(wait, host.MaxReportWait))
		defer t.Stop()
		expired = t.C
	}
	for {
		if err := ctx.Err(); err != nil {
			return mesh.Report{}, 0, fmt.Errorf("report: %w", err)
		}
		a.mu.Lock()
		if err := a.readableLocked(); err != nil {
			a.mu.Unlock()
			return mesh.Report{}, 0, err
		}
		if a.revision != after || expired == nil {
			running := make([]mesh.RunningContainer, 0, len(a.containers))
			for _, rc := range a.containers {
				running = append(running, cloneRunning(rc))
			}
			rep, rev := a.ledger.Report(running), a.revision
			a.mu.Unlock()
			return rep, rev, nil
		}
		changed := a.changed
		a.mu.Unlock()
		select {
		case <-changed:
		case <-expired:
			expired = nil
		case <-ctx.Done():
		}
	}
}

// touchLocked moves the report's revision on and wakes its long polls.
func (a *Agent) touchLocked() {
	a.revision++
	close(a.changed)
	a.changed = make(chan struct{})
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
	if err == nil && !repeat {
		err = a.runtimeCanRun(d)
	}
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

	watches, err := watchesFor(d, a.watches, nil, a.ports)
	if err != nil {
		a.mu.Unlock()
		return host.ApplyResult{}, fmt.Errorf("declaration %d: %w", d.Seq, err)
	}
	e := entryFor(d, OutcomeApplied)
	e.Ports = portsOf(watches)
	if d.Force || d.Rollback {
		e.ForcedPast = strings.Join(a.ledger.BelowFloor(a.containers, d), "; ")
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
	a.resume = nil
	for m, w := range a.watches {
		if watches[m] != w {
			w.stopLocked()
		}
	}
	a.watches = watches
	a.containers = declared(d, a.containers, now())
	a.touchLocked()
	cerr := a.checkpointLocked()
	if a.crashedAt(crashAfterCheckpoint) {
		a.mu.Unlock()
		return host.ApplyResult{}, errCrashed
	}
	a.epoch++
	epoch, specs := a.epoch, a.specsLocked()
	a.mu.Unlock()

	ev := a.log.Info()
	if d.Force || d.Rollback {
		ev = a.log.Warn().Bool("force", d.Force).Bool("rollback", d.Rollback).Str("reason", d.Reason).Str("forced_past", e.ForcedPast)
	}
	ev = ev.Uint64("seq", d.Seq).Str("plan", d.Plan).Str("request", d.Request).Strs("digests", digests(d))
	if e.Ports != nil {
		ev = ev.Any("ports", e.Ports)
	}
	ev.Uint64("journal_index", e.Index).Msg("declaration applied")

	a.handToRuntime(context.WithoutCancel(ctx), epoch, specs)
	if cerr != nil {
		a.log.Error().Err(cerr).Uint64("seq", d.Seq).Msg("declaration journalled but checkpoint failed")
		return host.ApplyResult{}, fmt.Errorf("declaration %d is journalled and stands (the report shows it), but writing the checkpoint failed: %w", d.Seq, cerr)
	}
	return host.ApplyResult{Seq: d.Seq}, nil
}

// refuseLocked journals a refusal and returns it, or an internal error if it
// runtimeCanRun refuses, as invalid, a declaration the runtime says it
// cannot run as declared (see Checker).
func (a *Agent) runtimeCanRun(d mesh.Declaration) error {
	ch, ok := a.rt.(Checker)
	if !ok {
		return nil
	}
	if err := ch.Check(d.Containers); err != nil {
		return &host.Refusal{Code: host.CodeInvalid, Message: fmt.Sprintf("runtime %s: %v", a.rt.Name(), err)}
	}
	return nil
}

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
	for _, w := range a.watches {
		w.stopLocked()
	}
	a.touchLocked()
	a.mu.Unlock()

	a.probers.Wait()
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

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

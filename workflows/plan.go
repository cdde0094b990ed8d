package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/meshroll/meshroll/internal/mesh"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// Plan is one merge's roll-out: build, compose, then push tier by tier. It
// always completes with a PlanState whose State says how it ended, in words a
// person on call can act on; it fails only if the workflow itself is
// cancelled.
//
// The plan is told apart by concern: its flow is here, its operator controls
// in plan_control.go, composing in plan_compose.go, tiers in plan_tiers.go,
// a batch's hand-over and its window in plan_hand.go, sending pushes and
// taking their answers in plan_answers.go, how it ends in plan_end.go (its
// words in reasons.go), and what the Web UI shows of it in plan_details.go.
func Plan(ctx workflow.Context, in meshapi.PlanInput) (meshapi.PlanState, error) {
	p := &plan{
		ctx:          ctx,
		in:           in,
		policy:       in.Policy.WithDefaults(),
		approved:     map[int]bool{},
		gate:         -1,
		analysisGate: -1,
		published:    meshapi.PlanBuilding, // set by whoever started the plan
		st: meshapi.PlanState{
			Plan:   workflow.GetInfo(ctx).WorkflowExecution.ID,
			Module: in.Module,
			Commit: in.Commit,
			State:  meshapi.PlanBuilding,
			Gates:  in.Gates,
			Tiers:  []meshapi.TierState{},
		},
	}
	if err := p.setup(ctx); err != nil {
		return p.st, err
	}
	return p.run(ctx)
}

// plan is one plan workflow's state; its methods are the workflow's steps.
type plan struct {
	// ctx is the workflow's root context, for publishing search attributes
	// and details from wherever the state changes.
	ctx    workflow.Context
	in     meshapi.PlanInput
	policy meshapi.PushPolicy
	st     meshapi.PlanState

	approved map[int]bool
	gate     int // the tier waiting at its gate now, or -1
	// analysisGate is the tier whose inconclusive analysis the plan waits
	// on a person for, or -1; analysisPassedBy is who approved it.
	analysisGate     int
	analysisPassedBy string
	aborted          bool
	abortReason      string
	cancelStep       workflow.CancelFunc

	// now is the plan's last words in its current details.
	now string

	// published is the state last written to the MeshrollState search
	// attribute.
	published meshapi.PlanStatus

	// targetList is the plan's targets as composed, for a put-back to
	// compose its machines again.
	targetList []meshapi.Target
	// alone names the machines pushed in a batch of their own.
	alone map[string]bool

	// byMachine and byRequest find a machine's progress by its name and by
	// the ID of a request the plan hands for it (its push and its
	// put-back), and inFlight counts, per tier, its machines pushing or
	// being put back: so that an answer, a note or a tier's "all answered"
	// costs the plan the same at any fleet size (see index).
	byMachine map[string]place
	byRequest map[string]place
	inFlight  []int
	// unshown counts the answers taken since the current details were
	// last written (see showAnswers).
	unshown int
	// liftedSignals counts hold-lifted signals, to wake a held plan.
	liftedSignals int

	// relays says the plan's answers come through relays (a plan of more
	// than relayAbove machines); relaysStarted counts them, for their IDs,
	// and relaysOpen those not yet ended; relayLost says why one ended
	// short of its answers. rehandAfter is how long a tier hears no answer
	// before it hands its unanswered pushes again, and handWindow how
	// many it has handed and unanswered at most (see awaitAnswers).
	relayAbove                int           // from its targets
	rehandAfter               time.Duration // from its targets
	handWindow                int           // from its targets
	relays                    bool
	relaysStarted, relaysOpen int
	relayLost                 string
	// unhanded are the requests of the hand-over in progress that wait
	// for room in its window (see hand), by request ID.
	unhanded map[string]bool

	// groups says tiers with group_by are pushed by group (groupedPlan).
	groups bool

	// notifies says the plan hands its events to notify targets (see
	// notifying); events counts them, for their keys, and announced is
	// the state last announced (announceState).
	notifies  bool
	events    int
	announced meshapi.PlanStatus
}

// setup registers the state and summary queries and the control updates,
// and starts taking the machines' answers: the push-result signal, or its
// relays' push-results bundles, are the one route by which the plan hears
// how a push ended (see take).
func (p *plan) setup(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, meshapi.QueryState, func() (meshapi.PlanState, error) {
		return p.st, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetQueryHandler(ctx, meshapi.QuerySummary, func() (meshapi.PlanState, error) {
		return p.st.Summarised(), nil
	}); err != nil {
		return err
	}
	if err := p.setControls(ctx); err != nil {
		return err
	}
	sig := newPlanSignals(ctx)
	p.takeHoldLifted(ctx, sig)
	p.takeMeasurements(ctx, sig)
	onSignal(ctx, sig, meshapi.SignalPushResult, p.take)
	onSignal(ctx, sig, meshapi.SignalPushResults, func(b meshapi.PushResults) {
		for _, r := range b.Results {
			p.take(r)
		}
	})
	onSignal(ctx, sig, meshapi.SignalNotifyTrouble, func(t meshapi.NotifyTrouble) { p.noteNotifyTrouble(ctx, t) })
	sig.start(ctx, func() { p.showAnswers(ctx) })
	return nil
}

// run rolls the plan out and turns how it ended into its result, in this
// one place.
func (p *plan) run(ctx workflow.Context) (meshapi.PlanState, error) {
	planStarted(ctx, p.in.Module)
	e := endingOf(p.roll(ctx))
	p.end(e.state, e.reason)
	if e.cancelled != nil {
		return p.st, e.cancelled
	}
	if e.state.Fails() {
		// A failed workflow carrying its state, so that the Web UI shows
		// it failed.
		return p.st, meshapi.PlanFailure(p.st)
	}
	return p.st, nil
}

// roll is the flow of docs/design.md, top to bottom: check the merge, find the
// machines that run the module, build, compose every machine's declaration,
// then push tier by tier. It returns the plan's ending, whatever it is.
func (p *plan) roll(ctx workflow.Context) error {
	if err := p.in.Validate(); err != nil {
		return endAs(meshapi.PlanRefused, err.Error())
	}
	targets, err := p.targets(ctx)
	if err != nil {
		return err
	}
	p.announce(ctx, meshapi.EventPlanStarted, fmt.Sprintf("started on %d %s in %d %s",
		len(targets), plural(len(targets), "machine", "machines"), len(p.st.Tiers), plural(len(p.st.Tiers), "tier", "tiers")), "")
	var b mesh.Build
	var composed *meshapi.ComposeTargetsResult
	switch {
	case p.in.Rollback != nil:
		p.details(ctx, "finding what to roll back to")
		b, targets, err = p.rollbackTarget(ctx, targets)
		if err == nil && len(targets) == 0 {
			return endAs(meshapi.PlanSuperseded, fmt.Sprintf("no machine runs %s above generation %d (%s): nothing to roll back",
				p.in.Module, b.Generation, mesh.ShortCommit(b.Commit)))
		}
	case p.in.Sync != nil:
		p.details(ctx, "finding the newest healthy build")
		b, targets, err = p.syncTarget(ctx, targets)
	default:
		p.details(ctx, "building")
		b, composed, err = p.build(ctx, targets)
	}
	if err != nil {
		return err
	}
	p.st.Build = &b

	p.st.State = meshapi.PlanComposing
	p.targetList = targets
	p.index()
	p.relays = p.relayed()
	p.groups = p.groupedPlan()
	p.details(ctx, "composing")
	decls, err := p.compose(ctx, targets, b, composed)
	if err != nil {
		return err
	}

	for ti := range p.st.Tiers {
		if err := p.hold(ctx, ti); err != nil {
			return err
		}
		if err := p.pushTier(ctx, ti, decls); err != nil {
			return err
		}
		if err := p.bake(ctx, ti); err != nil {
			return err
		}
	}
	return p.outcome(b)
}

// targets resolves the machines that run the module from the worker's mesh
// config, lays out the plan's tiers from them, and names them in the
// MeshrollMachines search attribute.
func (p *plan) targets(ctx workflow.Context) ([]meshapi.Target, error) {
	var tr meshapi.TargetsResult
	in := meshapi.TargetsInput{Module: p.in.Module}
	if s := p.in.Sync; s != nil && s.Remove {
		in.Remove = s.Machine
	}
	if err := workflow.ExecuteLocalActivity(targetsOptions(ctx), acts.Targets, in).Get(ctx, &tr); err != nil {
		return nil, endAs(meshapi.PlanRefused, errorReason(err))
	}
	p.notifies = tr.Notify
	if tr.Refused != "" {
		return nil, endAs(meshapi.PlanRefused, tr.Refused)
	}
	if len(tr.Targets) == 0 {
		return nil, endAs(meshapi.PlanRefused, fmt.Sprintf("no machine runs module %s", p.in.Module))
	}
	p.publishMachines(ctx, tr.Targets)
	p.relayAbove = tr.RelayAbove
	p.rehandAfter = meshapi.Rehand(tr.RehandAfter)
	p.handWindow = meshapi.Window(tr.HandWindow)
	for _, t := range tr.Targets {
		if n := len(p.st.Tiers); n == 0 || p.st.Tiers[n-1].Tier != t.Tier {
			p.st.Tiers = append(p.st.Tiers, meshapi.TierState{Tier: t.Tier, State: meshapi.TierWaiting})
		}
		ts := &p.st.Tiers[len(p.st.Tiers)-1]
		ts.Machines = append(ts.Machines, meshapi.MachineProgress{Machine: t.Machine, State: meshapi.MachineWaiting, Group: t.Group})
		if t.Alone {
			if p.alone == nil {
				p.alone = map[string]bool{}
			}
			p.alone[t.Machine] = true
		}
	}
	for _, tp := range tr.Tiers {
		for i := range p.st.Tiers {
			if p.st.Tiers[i].Tier == tp.Tier {
				p.st.Tiers[i].Policy = &tp
			}
		}
	}
	return tr.Targets, nil
}

// build builds the module at the merge's commit and records it in the
// catalogue (the Build activity does both). A plan of at most one compose
// batch composes its targets in the same activity: their composition is
// returned too, nil when it is left to compose (a larger plan, or a
// composition that failed transiently). Building and composing in one
// activity spares a small plan a workflow task and an activity task.
func (p *plan) build(ctx workflow.Context, targets []meshapi.Target) (mesh.Build, *meshapi.ComposeTargetsResult, error) {
	in := meshapi.BuildInput{Plan: p.st.Plan, Module: p.in.Module, Commit: p.in.Commit}
	if len(targets) > composeBatch {
		var b mesh.Build
		err := p.step(ctx, func(sctx workflow.Context) error {
			return workflow.ExecuteActivity(buildOptions(sctx, p.in.Module, p.in.Commit, 0), acts.Build, in).Get(sctx, &b)
		})
		return b, nil, p.interrupted(ctx, err, "build failed: ")
	}
	var r meshapi.BuildComposeResult
	err := p.step(ctx, func(sctx workflow.Context) error {
		return workflow.ExecuteActivity(buildOptions(sctx, p.in.Module, p.in.Commit, len(targets)), acts.BuildAndCompose,
			meshapi.BuildComposeInput{Build: in, Targets: targets}).Get(sctx, &r)
	})
	if err != nil {
		return mesh.Build{}, nil, p.interrupted(ctx, err, "build failed: ")
	}
	if r.Composed == nil {
		workflow.GetLogger(ctx).Warn("Composing with the build failed; composing again", "error", r.ComposeError)
	}
	return r.Build, r.Composed, nil
}

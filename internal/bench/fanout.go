package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/meshroll/meshroll/internal/agent"
	"github.com/meshroll/meshroll/internal/bench/hist"
	"github.com/meshroll/meshroll/internal/bench/stack"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// tiers is how many tiers every fan-out plan has.
const tiers = 3

// cost is what one fan-out plan cost in history.
type cost struct {
	machines int
	events   int // plan and machine workflows
	actions  int
	tasks    int // server tasks (hist.Tasks)
	sticky   int // workflow tasks that timed out on a sticky queue (hist.StickyTimeouts)
	largest  int // events of the largest single history
}

// costOf is the cost of a plan of n machines from its own history.
func costOf(n int, events []*historypb.HistoryEvent) cost {
	return cost{machines: n, events: len(events), actions: hist.Actions(events), tasks: hist.Tasks(events),
		sticky: hist.StickyTimeouts(events), largest: len(events)}
}

// add counts a machine workflow's events of the plan into c; size is its
// whole history's length, for the largest.
func (c *cost) add(events []*historypb.HistoryEvent, size int) {
	c.events += len(events)
	c.actions += hist.Actions(events)
	c.tasks += hist.Tasks(events)
	c.sticky += hist.StickyTimeouts(events)
	c.largest = max(c.largest, size)
}

// stickyNote says what a sticky timeout costs: each is a workflow task
// moved to the task queue with its whole history and replayed
// (workerapp.WorkerOptions).
const stickyNote = "each goes to the task queue and replays its workflow from the start"

// pendingCeiling is a fan-out plan waiting for this run's engine rate, to
// be read against its engine ceiling.
type pendingCeiling struct {
	scenario, figure string
	machines         int
	next             bool // the next plan, machine workflows running
	whole            time.Duration
	tasks            int
	// cpuFigure reads serverCPU, the dev server's CPU over the plan,
	// against the CPU the engine spends on as many no-op tasks: the part
	// of the ratio the server's work per task explains on a CPU-bound box.
	cpuFigure string
	serverCPU time.Duration
}

// fanout runs one plan across each size's machines in three tiers and
// reads, from the plan's history, how long each tier took; from the plan's
// and every machine workflow's history, what it cost.
func (b *bench) fanout(ctx context.Context, run int) error {
	for _, n := range b.sz.fanout {
		if err := b.fanoutOne(ctx, run, n); err != nil {
			return fmt.Errorf("%d machines: %w", n, err)
		}
	}
	return nil
}

// fanoutScenario is the table's scenario for a fan-out of n machines: the
// runtime is named when it is not noop, whose rows are the orchestration's.
func (b *bench) fanoutScenario(n int) string {
	if b.noopRuntime() {
		return fmt.Sprintf("fan-out %d", n)
	}
	return fmt.Sprintf("fan-out %d, %s runtime", n, b.o.Runtime)
}

func (b *bench) fanoutOne(ctx context.Context, run, n int) error {
	specs := fleetSpecs(fmt.Sprintf("f%dr%d", n, run), n, tiers)
	m, err := b.newFleet(ctx, fmt.Sprintf("bench-fanout-%d-%d", n, run), specs,
		stack.MeshOptions{Runtime: b.o.Runtime, DockerSocket: b.o.DockerSocket, Registry: b.reg})
	if err != nil {
		return err
	}
	defer func() { _ = m.Close() }()
	worker, err := b.startFanoutWorker(ctx, m, run, n)
	if err != nil {
		return err
	}
	defer worker.stop()
	atStart, err := b.usage(worker)
	if err != nil {
		return err
	}
	c := b.srv.Client()
	events, err := b.planFleet(ctx, m)
	if err != nil {
		return err
	}
	afterFirst, err := b.usage(worker)
	if err != nil {
		return err
	}
	whole := hist.Duration(events)
	scenario := b.fanoutScenario(n)
	note := ""
	if n == b.sz.fanout[0] {
		note = "the ideal: one machine per tier"
	}
	b.t.Add(scenario, "whole plan, start to converged", "s", note, seconds(whole))
	if b.runs("engine") {
		// Filled in once this run's engine scenario has measured its rate.
		b.t.Add(scenario, "whole / engine ceiling", "×", engineCeilingNote(n, false))
		b.addSpreadRow(scenario, n, false)
		b.t.Add(scenario, firstCPUFigure, "×", cpuCeilingNote)
	}
	for k, d := range tierTimes(events) {
		b.t.Add(scenario, fmt.Sprintf("tier %d (%d machines)", k+1, count(specs, k+1)), "s", "", seconds(d))
	}
	b.pushToHealthy(scenario, "first plan", events)
	if ideal, ok := b.t.Get(b.fanoutScenario(b.sz.fanout[0]), "whole plan, start to converged"); ok && n != b.sz.fanout[0] {
		target := ""
		if n == 100 {
			target = "target ≤ 2"
		}
		b.t.Add(scenario, fmt.Sprintf("whole / ideal (fan-out %d)", b.sz.fanout[0]), "×", target, seconds(whole)/ideal.Values[len(ideal.Values)-1])
	}

	planBytes := hist.Bytes(events)
	co := costOf(n, events)
	acts := countActivities(events)
	seen := map[string]int{} // events of each machine workflow after the first plan
	for _, s := range specs {
		me, err := hist.Events(ctx, c, meshapi.MachineID(s.Name))
		if err != nil {
			return err
		}
		seen[s.Name] = len(me)
		co.add(me, len(me))
		acts += countActivities(me)
	}
	b.costs = append(b.costs, co)
	b.maxPlanActivities = max(b.maxPlanActivities, acts)
	b.ceilings = append(b.ceilings, pendingCeiling{scenario: scenario, figure: "whole / engine ceiling", machines: n, whole: whole, tasks: co.tasks,
		cpuFigure: firstCPUFigure, serverCPU: afterFirst.server.CPU - atStart.server.CPU})

	// The next plan finds every machine workflow running: what a plan
	// costs once the fleet has been pushed before.
	beforeNext, err := b.usage(worker)
	if err != nil {
		return err
	}
	if events, err = b.planFleet(ctx, m); err != nil {
		return err
	}
	afterNext, err := b.usage(worker)
	if err != nil {
		return err
	}
	next := hist.Duration(events)
	b.t.Add(scenario, "next plan, machine workflows running: whole", "s", "", seconds(next))
	b.pushToHealthy(scenario, "next plan", events)
	if b.runs("engine") {
		b.t.Add(scenario, "next plan / engine ceiling", "×", engineCeilingNote(n, true))
		b.addSpreadRow(scenario, n, true)
		b.t.Add(scenario, nextCPUFigure, "×", cpuCeilingNote)
	}
	planBytes = max(planBytes, hist.Bytes(events))
	cn := costOf(n, events)
	for _, s := range specs {
		me, err := b.events(ctx, meshapi.MachineID(s.Name))
		if err != nil {
			return err
		}
		cn.add(me[seen[s.Name]:], len(me))
	}
	b.costsNext = append(b.costsNext, cn)
	if worker.proc != nil {
		b.t.Add(scenario, "worker process peak RSS (VmHWM), both plans", "MiB", "", float64(afterNext.worker.PeakRSSBytes)/(1<<20))
		b.t.Add(scenario, "worker peak RSS above its idle start, per machine", "KiB", "", float64(afterNext.worker.PeakRSSBytes-atStart.worker.PeakRSSBytes)/float64(n)/1024)
		b.t.Add(scenario, "worker CPU per machine pushed, first plan (user+system)", "ms", "", millis((afterFirst.worker.CPU-atStart.worker.CPU)/time.Duration(n)))
		b.t.Add(scenario, "worker CPU per machine pushed, next plan (user+system)", "ms", "", millis((afterNext.worker.CPU-beforeNext.worker.CPU)/time.Duration(n)))
	}
	b.t.Add(scenario, "dev server CPU per machine pushed, first plan (user+system)", "ms", "", millis((afterFirst.server.CPU-atStart.server.CPU)/time.Duration(n)))
	b.t.Add(scenario, "dev server CPU per machine pushed, next plan (user+system)", "ms", "", millis((afterNext.server.CPU-beforeNext.server.CPU)/time.Duration(n)))
	b.ceilings = append(b.ceilings, pendingCeiling{scenario: scenario, figure: "next plan / engine ceiling", machines: n, next: true, whole: next, tasks: cn.tasks,
		cpuFigure: nextCPUFigure, serverCPU: afterNext.server.CPU - beforeNext.server.CPU})

	b.t.Add("cost", fmt.Sprintf("history events, %d machines, first plan (plan + machine workflows)", n), "", "", float64(co.events))
	b.t.Add("cost", fmt.Sprintf("history events, %d machines, next plan", n), "", "", float64(cn.events))
	b.t.Add("cost", fmt.Sprintf("billable actions, %d machines, first plan", n), "", "", float64(co.actions))
	b.t.Add("cost", fmt.Sprintf("billable actions, %d machines, next plan", n), "", "", float64(cn.actions))
	b.t.Add("cost", fmt.Sprintf("server tasks per machine pushed, %d machines, first plan", n), "", "", float64(co.tasks)/float64(n))
	b.t.Add("cost", fmt.Sprintf("server tasks per machine pushed, %d machines, next plan", n), "", "target ≤ 3", float64(cn.tasks)/float64(n))
	b.t.Add("cost", fmt.Sprintf("workflow tasks that waited out the worker's sticky queue, per machine pushed, %d machines, first plan", n), "", stickyNote, float64(co.sticky)/float64(n))
	b.t.Add("cost", fmt.Sprintf("workflow tasks that waited out the worker's sticky queue, per machine pushed, %d machines, next plan", n), "", stickyNote, float64(cn.sticky)/float64(n))
	if n == b.sz.fanout[len(b.sz.fanout)-1] {
		b.t.Add("cost", fmt.Sprintf("largest history in the %d-machine plan", n), "events", "target ≤ 10,000 (limit 51,200)", float64(max(co.largest, cn.largest)))
		b.t.Add("cost", fmt.Sprintf("the %d-machine plan's own history, bytes per machine (larger of two plans)", n), "B", "limit 50 MB a history", float64(planBytes)/float64(n))
		b.t.Add("cost", fmt.Sprintf("history events per machine pushed, %d machines, first plan", n), "", "target ≤ 15", float64(co.events)/float64(n))
		b.t.Add("cost", fmt.Sprintf("history events per machine pushed, %d machines, next plan", n), "", "target ≤ 15", float64(cn.events)/float64(n))
	}
	return nil
}

// pushToHealthy adds, on a runtime that runs real images, the plan's
// tiers summed: from each hand-out to the last machine healthy, so the
// pulls, starts and health of a real build, without its build and
// compose. The first plan's pulls find no layer of the image on the
// machine; the next plan's replace a running container.
func (b *bench) pushToHealthy(scenario, plan string, events []*historypb.HistoryEvent) {
	if b.noopRuntime() {
		return
	}
	var sum time.Duration
	for _, d := range tierTimes(events) {
		sum += d
	}
	b.t.Add(scenario, "push to healthy, "+plan+", tiers summed", "s", "", seconds(sum))
}

func count(specs []stack.MachineSpec, tier int) int {
	n := 0
	for _, s := range specs {
		if s.Tier == tier {
			n++
		}
	}
	return n
}

func countActivities(events []*historypb.HistoryEvent) int {
	n := 0
	for _, e := range events {
		if e.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED {
			n++
		}
	}
	return n
}

// tierTimes is, for each hand-out, the time from the plan handing pushes
// to the machine workflows to the last machine's answer (the last signal,
// child's end or activity's end before the next hand-out, or the plan's
// end). A hand-out is a batch's relays and HandPushes (local for a few
// machines, regular for more), the first after the Holds check the plan
// makes before every batch: a batch larger than push.hand_window hands
// over more as answers make room, all one hand-out. The plan hands out
// once per batch, so a tier pushed whole, as in fan-out, is one entry,
// and a batched tier one entry per batch.
func tierTimes(events []*historypb.HistoryEvent) []time.Duration {
	var starts []int
	lastTaskStarted := 0
	checked := true // the Holds check since the last hand event: the next one starts a hand-out
	handScheduled := hist.ActivityScheduled("HandPushes")
	for i, e := range events {
		hand := -1
		switch {
		case e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			lastTaskStarted = i
		case hist.LocalActivityType(e) == "Holds":
			checked = true
		case isChildTier(e) || handScheduled(e):
			hand = i
		case hist.LocalActivityType(e) == "HandPushes":
			// A local activity ran during the workflow task its marker
			// closes: the hand-out began when that task started.
			hand = lastTaskStarted
		}
		if hand >= 0 && checked {
			starts = append(starts, hand)
			checked = false
		}
	}
	out := make([]time.Duration, len(starts))
	for k, s := range starts {
		end := len(events)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		last := events[s].GetEventTime().AsTime()
		for _, e := range events[s:end] {
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
				enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
				last = e.GetEventTime().AsTime()
			}
		}
		out[k] = last.Sub(events[s].GetEventTime().AsTime())
	}
	return out
}

// isChildTier picks a child workflow's start: a relay the plan starts for
// a hand-out.
func isChildTier(e *historypb.HistoryEvent) bool {
	return e.GetEventType() == enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
}

// fitCosts fits events and actions per plan as a + b·machines over the
// fan-out sizes (least squares over every run), for first and next plans.
func (b *bench) fitCosts() {
	for _, set := range []struct {
		what  string
		costs []cost
	}{{"first plan", b.costs}, {"next plan", b.costsNext}} {
		if len(set.costs) < 2 {
			continue
		}
		xs := make([]float64, len(set.costs))
		ev := make([]float64, len(set.costs))
		ac := make([]float64, len(set.costs))
		tk := make([]float64, len(set.costs))
		for i, c := range set.costs {
			xs[i], ev[i], ac[i], tk[i] = float64(c.machines), float64(c.events), float64(c.actions), float64(c.tasks)
		}
		ea, eb := fit(xs, ev)
		aa, ab := fit(xs, ac)
		ta, tb := fit(xs, tk)
		b.t.Add("cost", "history events per "+set.what+": a (fixed)", "", fmt.Sprintf("events ≈ %.0f + %.1f·machines", ea, eb), ea)
		b.t.Add("cost", "history events per "+set.what+": b (per machine)", "", "target ≤ 15 per machine pushed", eb)
		b.t.Add("cost", "billable actions per "+set.what+": a (fixed)", "", fmt.Sprintf("actions ≈ %.0f + %.1f·machines", aa, ab), aa)
		b.t.Add("cost", "billable actions per "+set.what+": b (per machine)", "", "", ab)
		b.t.Add("cost", "server tasks per "+set.what+": a (fixed)", "", fmt.Sprintf("tasks ≈ %.0f + %.1f·machines", ta, tb), ta)
		b.t.Add("cost", "server tasks per "+set.what+": b (per machine)", "", "", tb)
	}
}

func fit(xs, ys []float64) (a, b float64) {
	var sx, sy, sxx, sxy float64
	n := float64(len(xs))
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return sy / n, 0
	}
	b = (n*sxy - sx*sy) / d
	return (sy - b*sx) / n, b
}

// The rows that read a plan's server CPU against its tasks at the no-op
// task's CPU, and what they mean.
const (
	firstCPUFigure = "first plan: dev server CPU / its tasks at the no-op task's CPU"
	nextCPUFigure  = "next plan: dev server CPU / its tasks at the no-op task's CPU"
	cpuCeilingNote = "the part of the ratio above that the server's CPU per task explains; /proc counts CPU in 10 ms ticks, so it reads well from hundreds of machines up"
)

// engineCeilingNote says what a ceiling row is read against. The first
// plan also starts every machine workflow, which the no-op task rate does
// not price; the next plan is the like-for-like reading.
func engineCeilingNote(n int, next bool) string {
	note := "ceiling: the plan's server tasks at the engine's no-op task rate"
	if !next {
		note += " (plus starting the machine workflows)"
	}
	if n == 1000 {
		note = "target ≤ 1.3; " + note
	}
	return note
}

// readCeilings reads each fan-out plan of this run against the engine
// ceiling: the time the engine needs, at rate server tasks a second, for
// the tasks the plan made; and the server's CPU over the plan against
// cpuPerTask, what a no-op task cost it.
func (b *bench) readCeilings(rate float64, cpuPerTask time.Duration, spread spreadRates) {
	for _, p := range b.ceilings {
		ceiling := float64(p.tasks) / rate
		b.t.Add(p.scenario, p.figure, "×", "", p.whole.Seconds()/ceiling)
		if cpuPerTask > 0 && p.tasks > 0 {
			b.t.Add(p.scenario, p.cpuFigure, "×", "", float64(p.serverCPU)/float64(cpuPerTask*time.Duration(p.tasks)))
		}
		if r := spread.rate(p.next); p.machines == spread.machines && r > 0 {
			b.t.Add(p.scenario, spreadFigure(p.next), "×", "", p.whole.Seconds()/(float64(p.tasks)/r))
		}
	}
	b.ceilings = nil
}

// addSpreadRow puts a plan's row against the spread ceiling in place, to
// be filled in by readCeilings: only the largest plan's, the size the
// spread ceiling is measured at.
func (b *bench) addSpreadRow(scenario string, n int, next bool) {
	if n != b.spreadMachines() {
		return
	}
	note := "ceiling: the plan's server tasks at the engine's rate over as many one-activity workflows as machines, each started by a signal"
	if next {
		note = "ceiling: the plan's server tasks at the engine's rate over as many running workflows as machines, each signalled to run one activity"
	}
	b.t.Add(scenario, spreadFigure(next), "×", note)
}

func spreadFigure(next bool) string {
	if next {
		return "next plan / spread ceiling"
	}
	return "whole / spread ceiling"
}

// fanoutWorker is a fan-out's worker: in a process of its own on the noop
// runtime, so that its RSS and CPU per machine are read apart from the
// agents' and the bench's; in this process on the runtimes that run real
// builds, which need the mesh's own builder.
type fanoutWorker struct {
	proc *stack.WorkerProcess // nil: in this process
}

// startFanoutWorker starts m's worker for a fan-out of n machines; with
// -pprof, the worker process writes its profiles to DIR/fan-out-<n>.
func (b *bench) startFanoutWorker(ctx context.Context, m *stack.Mesh, run, n int) (fanoutWorker, error) {
	if !b.noopRuntime() {
		return fanoutWorker{}, m.StartWorker(ctx)
	}
	pprofDir := ""
	if b.o.Pprof != "" && run == 0 {
		pprofDir = filepath.Join(b.o.Pprof, fmt.Sprintf("fan-out-%d", n))
		if err := os.MkdirAll(pprofDir, 0o755); err != nil {
			return fanoutWorker{}, fmt.Errorf("fan-out worker profiles: %w", err)
		}
	}
	wp, err := m.StartWorkerProcess(ctx, pprofDir)
	if err != nil {
		return fanoutWorker{}, err
	}
	return fanoutWorker{proc: wp}, nil
}

// usage is the worker process's usage so far (zero in this process).
func (w fanoutWorker) usage() (stack.Usage, error) {
	if w.proc == nil {
		return stack.Usage{}, nil
	}
	return stack.ReadUsage(w.proc.Pid())
}

// usages are the fan-out worker's and the dev server's usage at one
// moment.
type usages struct{ worker, server stack.Usage }

// usage reads the worker's and the server's usage together, so that a
// plan's CPU is read on both sides of the same span.
func (b *bench) usage(w fanoutWorker) (usages, error) {
	wu, err := w.usage()
	if err != nil {
		return usages{}, err
	}
	su, err := b.srv.Usage()
	return usages{worker: wu, server: su}, err
}

func (w fanoutWorker) stop() {
	if w.proc != nil {
		_ = w.proc.Stop()
	}
}

// noopRuntime reports whether the fan-out's agents run the noop runtime,
// whose figures are the orchestration's alone.
func (b *bench) noopRuntime() bool {
	return b.o.Runtime == "" || b.o.Runtime == agent.RuntimeNoop
}

package activities

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rs/zerolog"
	"go.temporal.io/sdk/activity"

	"github.com/meshroll/meshroll/internal/analysis"
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// analysisBeat is how often Analyse heartbeats while it waits for its next
// measurement or for a slow provider: well inside the ~20s heartbeat
// timeout the plan gives it, while intervals may be minutes.
const analysisBeat = 5 * time.Second

// MeasureTimeout bounds one measurement (and a shorter interval bounds it
// further): a provider that takes longer is counted as an error
// measurement, towards ErrorLimit, rather than stalling the check.
const MeasureTimeout = 30 * time.Second

// Analyse runs one analysis check for a tier, from the worker's config:
// it measures the check every interval, from Since plus its initial delay,
// until analysis.Judge says it passed or failed, or more than
// analysis.ErrorLimit measurements in a row could not be taken
// (inconclusive). A failed check, dry run or not, is a result, not an
// error: what to do about it is the plan's.
//
// Each measurement goes to the plan at once (SignalMeasured), so that plan
// show and the fleet page see the check as it runs, and into the
// activity's heartbeat: a retry (the worker killed mid-analysis) restores
// the measurements taken and goes on from the last one, so it neither
// loses them nor waits the initial delay again. One taken after the last
// heartbeat the server kept (heartbeats are throttled) is taken again; its
// signal may then have reached the plan under an earlier time.
//
// A check or provider the worker's config no longer has, or a query that
// no longer renders, is inconclusive at once, saying what to fix: the plan
// holds at a gate for a person rather than failing a build that was never
// measured.
func (a *Activities) Analyse(ctx context.Context, in meshapi.AnalyseInput) (meshapi.AnalyseResult, error) {
	log := a.Log.With().Str("plan", in.Plan).Str("module", in.Build.Module).Int("tier", in.Tier).Str("check", in.Check).Logger()
	ch, prov, head, why := a.analysisCheck(in)
	if why != "" {
		return analysisEnd(log, head, meshapi.AnalysisInconclusive, why, nil), nil
	}
	interval := cmp.Or(ch.Interval, config.DefaultAnalysisInterval)
	vars := analysisVars(in)

	var ms []meshapi.Measurement
	if activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &ms); err != nil {
			log.Warn().Err(err).Msg("analysis heartbeat unreadable; measuring from the start")
			ms = nil
		} else {
			log.Info().Int("measurements", len(ms)).Msg("analysis resumed")
		}
	}
	ms = a.withTaken(ctx, log, in, ms)
	if len(ms) == 0 {
		a.announce(ctx, log, in, head, in.Since.Add(ch.InitialDelay))
	}
	for {
		// Judged first, so that a retry of an attempt that died after its
		// last measurement ends at once with the same verdict.
		switch v := analysis.Judge(ch, ms); {
		case v != meshapi.AnalysisRunning:
			return analysisEnd(log, head, v, judgedReason(ch, v, ms), ms), nil
		case analysis.ErrorsInARow(ms) > analysis.ErrorLimit:
			why := fmt.Sprintf("%s could not be measured %d times in a row: %s", providerWords(ch.Provider, prov, head.Query),
				analysis.ErrorsInARow(ms), ms[len(ms)-1].Error)
			return analysisEnd(log, head, meshapi.AnalysisInconclusive, why, ms), nil
		}
		due := in.Since.Add(ch.InitialDelay)
		if n := len(ms); n > 0 {
			due = ms[n-1].At.Add(interval)
		}
		if err := waitBeating(ctx, due, ms); err != nil {
			return meshapi.AnalyseResult{}, err
		}
		m := measureBeating(ctx, prov, ch, vars, min(interval, MeasureTimeout), ms)
		if err := ctx.Err(); err != nil {
			return meshapi.AnalyseResult{}, err // cancelled by the plan: the measurement is moot
		}
		ms = append(ms, m)
		activity.RecordHeartbeat(ctx, ms)
		ev := log.Info()
		if m.Error != "" {
			ev = log.Warn().Str("error", m.Error)
		}
		ev.Time("at", m.At).Str("value", m.ValueWords()).Str("verdict", m.Verdict()).Int("measurement", len(ms)).Msg("analysis measured")
		if err := a.Plans.Measured(ctx, in.Plan, meshapi.Measured{Tier: in.Tier, Check: head, Measurement: m}); err != nil {
			// The result carries every measurement; a plan that missed
			// this one sees it then.
			log.Warn().Err(err).Msg("plan did not take the measurement")
		}
	}
}

// announce tells the plan what the check asks before its first
// measurement, due at due: waiting until then when that is still to come.
func (a *Activities) announce(ctx context.Context, log zerolog.Logger, in meshapi.AnalyseInput, head meshapi.AnalysisCheck, due time.Time) {
	if due.After(time.Now()) {
		head.Verdict, head.FirstDue = meshapi.AnalysisWaiting, &due
	}
	if err := a.Plans.Started(ctx, in.Plan, meshapi.AnalysisStarted{Tier: in.Tier, Check: head}); err != nil {
		log.Warn().Err(err).Msg("plan did not take what the check asks; it shows it with the first measurement")
	}
}

// withTaken adds to ms, the measurements a retry's heartbeat kept (none on
// a first attempt), those
// the plan took by signal after the last heartbeat that reached the server,
// in time order: a measurement already taken is not taken again. A plan
// that cannot be asked leaves ms as it is (the heartbeat's).
func (a *Activities) withTaken(ctx context.Context, log zerolog.Logger, in meshapi.AnalyseInput, ms []meshapi.Measurement) []meshapi.Measurement {
	taken, err := a.Plans.Taken(ctx, in.Plan, in.Tier, in.Check)
	if err != nil {
		log.Warn().Err(err).Msg("could not read the plan's measurements; going on from the heartbeat's")
		return ms
	}
	c := meshapi.AnalysisCheck{Measurements: slices.Clone(ms)}
	added := 0
	for _, m := range taken {
		if c.Add(m) {
			added++
		}
	}
	if added > 0 {
		slices.SortFunc(c.Measurements, func(x, y meshapi.Measurement) int { return x.At.Compare(y.At) })
		log.Info().Int("measurements", len(c.Measurements)).Int("from_plan", added).Msg("analysis resumed with the plan's measurements")
	}
	return c.Measurements
}

// analysisCheck resolves in's check and its provider in the worker's
// config, and what the plan is told of the check (its fields, the query
// rendered, verdict running); why says what is wrong when they cannot be
// resolved.
func (a *Activities) analysisCheck(in meshapi.AnalyseInput) (config.Check, config.Provider, meshapi.AnalysisCheck, string) {
	head := meshapi.AnalysisCheck{Check: in.Check, Verdict: meshapi.AnalysisRunning}
	ch, ok := a.Mesh.Current().Analysis.Checks[in.Check]
	if !ok {
		return ch, config.Provider{}, head, fmt.Sprintf("check %s is not under analysis.checks in the worker's config; "+
			"fix the worker's config, or approve to go on without it", in.Check)
	}
	head.Provider, head.Success, head.Interval = ch.Provider, ch.Success, cmp.Or(ch.Interval, config.DefaultAnalysisInterval)
	head.Count, head.FailureLimit, head.DryRun = ch.Count, ch.FailureLimit, ch.DryRun
	prov, ok := a.Mesh.Current().Analysis.Providers[ch.Provider]
	if !ok {
		return ch, prov, head, fmt.Sprintf("check %s names provider %s, which is not under analysis.providers in the worker's config; "+
			"fix the worker's config, or approve to go on without the check", in.Check, ch.Provider)
	}
	q, err := analysis.Query(prov, ch, analysisVars(in))
	if err != nil {
		return ch, prov, head, fmt.Sprintf("check %s: %v; fix the worker's config, or approve to go on without the check", in.Check, err)
	}
	head.Query = q
	return ch, prov, head, ""
}

// analysisVars is what in's query templates see.
func analysisVars(in meshapi.AnalyseInput) config.AnalysisVars {
	return config.AnalysisVars{Plan: in.Plan, Module: in.Build.Module, Commit: in.Build.Commit,
		Generation: in.Build.Generation, Tier: in.Tier, Machines: in.Machines}
}

// providerWords names a provider for a person: its name and where it is
// (a Prometheus server's address, a web check's URL).
func providerWords(name string, p config.Provider, query string) string {
	switch {
	case p.Prometheus != nil:
		return fmt.Sprintf("%s (%s)", name, p.Prometheus.Address)
	case p.Web != nil:
		return fmt.Sprintf("%s (%s)", name, query)
	}
	return name
}

// judgedReason says why a check failed, in words a person on call can act
// on: how many measurements failed against how many are allowed, and the
// success condition the last failed one did not meet.
func judgedReason(ch config.Check, v meshapi.Verdict, ms []meshapi.Measurement) string {
	if v != meshapi.AnalysisFailed {
		return ""
	}
	judged, failed := 0, 0
	var last meshapi.Measurement
	for _, m := range ms {
		if m.Error != "" {
			continue
		}
		judged++
		if !m.Passed {
			failed, last = failed+1, m
		}
	}
	return fmt.Sprintf("%d of %d %s failed, more than the %d allowed: %s was false on %s",
		failed, judged, plural(judged, "measurement", "measurements"), ch.FailureLimit, ch.Success, last.ValueWords())
}

// analysisEnd is the check's result, logged.
func analysisEnd(log zerolog.Logger, head meshapi.AnalysisCheck, v meshapi.Verdict, why string, ms []meshapi.Measurement) meshapi.AnalyseResult {
	c := head
	c.Verdict, c.Reason, c.Measurements = v, why, ms
	ev := log.Info()
	if v != meshapi.AnalysisPassed {
		ev = log.Warn()
	}
	if n := len(ms); n > 0 {
		ev = ev.Str("value", ms[n-1].ValueWords())
	}
	ev.Str("verdict", string(v)).Str("reason", why).Int("measurements", len(ms)).Bool("dry_run", c.DryRun).Msg("analysis ended")
	return meshapi.AnalyseResult{Check: c}
}

// waitBeating waits until t, heartbeating ms every analysisBeat, or until
// ctx ends.
func waitBeating(ctx context.Context, t time.Time, ms []meshapi.Measurement) error {
	for {
		d := time.Until(t)
		if d <= 0 {
			return ctx.Err()
		}
		activity.RecordHeartbeat(ctx, ms)
		timer := time.NewTimer(min(d, analysisBeat))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// measureBeating takes one measurement now, bounded by timeout,
// heartbeating ms meanwhile so that a slow provider does not time the
// activity out.
func measureBeating(ctx context.Context, p config.Provider, ch config.Check, vars config.AnalysisVars, timeout time.Duration, ms []meshapi.Measurement) meshapi.Measurement {
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var m meshapi.Measurement
	whileBeating(ctx, analysisBeat, ms, func() {
		// Milliseconds: what Prometheus evaluates at, and a time that comes
		// back from JSON (the heartbeat, the plan's state) equal to itself.
		m = analysis.Measure(mctx, p, ch, vars, time.Now().UTC().Truncate(time.Millisecond))
	})
	return m
}

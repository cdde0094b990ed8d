package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// Plans is the activities' view of the plan workflows: whether the plan
// that asked for a push still runs, and the routes by which a plan hears
// how a push ended and what an analysis measured.
type Plans interface {
	// Running says whether plan's workflow still runs, with its status.
	Running(ctx context.Context, plan string) (status string, running bool, err error)
	// Answer gives a push's result to its plan or relay: alone (the
	// push-result signal), or with the answers of other pushes going there
	// (push-results) when r.Bundle says the plan takes them so. A plan
	// that has ended is not an error: the machine workflow keeps the
	// answer for anyone who asks.
	Answer(ctx context.Context, r meshapi.PushResult) error
	// Measured gives a running analysis's measurement to plan (the
	// measured signal), so that the plan shows it before the check ends.
	// A plan that has ended is not an error: nobody is left to show it to.
	Measured(ctx context.Context, plan string, m meshapi.Measured) error
	// Started tells plan what a check asks before its first measurement
	// (the analysis-started signal). A plan that has ended is not an
	// error.
	Started(ctx context.Context, plan string, s meshapi.AnalysisStarted) error
	// Taken is the measurements plan holds of tier's check, from the
	// measured signals it took: what a retried analysis goes on from when
	// its last heartbeat did not reach the server (heartbeats are
	// throttled; signals are not).
	Taken(ctx context.Context, plan string, tier int, check string) ([]meshapi.Measurement, error)
}

// TemporalPlans asks and signals the Temporal service. Made by
// NewTemporalPlans, the pushes of a worker share its answers to whether a
// plan runs (runningCache) and send their answers in bundles
// (answerBundles).
type TemporalPlans struct {
	Client  client.Client
	Log     zerolog.Logger
	running *runningCache
	bundles *answerBundles
}

// NewTemporalPlans is TemporalPlans whose Running answers are shared and
// whose answers travel in bundles.
func NewTemporalPlans(c client.Client, log zerolog.Logger) TemporalPlans {
	p := TemporalPlans{Client: c, Log: log}
	p.running = newRunningCache(p.describe)
	p.bundles = newAnswerBundles(p.sendBundle)
	return p
}

// Running implements Plans.
func (p TemporalPlans) Running(ctx context.Context, plan string) (string, bool, error) {
	if p.running != nil {
		return p.running.Running(ctx, plan)
	}
	return p.describe(ctx, plan)
}

// describe asks the server for the plan's status.
func (p TemporalPlans) describe(ctx context.Context, plan string) (string, bool, error) {
	d, err := p.Client.DescribeWorkflow(ctx, plan, "")
	if err != nil {
		return "", false, fmt.Errorf("describe plan %s: %w", plan, err)
	}
	return d.Status.String(), d.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// Answer implements Plans.
func (p TemporalPlans) Answer(ctx context.Context, r meshapi.PushResult) error {
	if r.Bundle && p.bundles != nil {
		return p.bundles.Answer(ctx, r)
	}
	ended, err := p.signal(ctx, r.AnswerTo(), meshapi.SignalPushResult, r)
	if ended {
		p.Log.Warn().Str("plan", r.Plan).Str("to", r.AnswerTo()).Str("machine", r.Machine).Msg("plan did not take its answer: it has ended")
	}
	return err
}

// sendBundle signals answers to the plan or relay to, as Answer does one.
func (p TemporalPlans) sendBundle(ctx context.Context, to string, b meshapi.PushResults) error {
	ended, err := p.signal(ctx, to, meshapi.SignalPushResults, b)
	if ended {
		p.Log.Warn().Str("plan", b.Results[0].Plan).Str("to", to).Int("answers", len(b.Results)).Msg("plan did not take its answers: it has ended")
	}
	return err
}

// Taken implements Plans, through the plan's state query.
func (p TemporalPlans) Taken(ctx context.Context, plan string, tier int, check string) ([]meshapi.Measurement, error) {
	v, err := p.Client.QueryWorkflow(ctx, plan, "", meshapi.QueryState)
	if err != nil {
		return nil, fmt.Errorf("query plan %s: %w", plan, err)
	}
	var st meshapi.PlanState
	if err := v.Get(&st); err != nil {
		return nil, fmt.Errorf("read plan %s's state: %w", plan, err)
	}
	for _, t := range st.Tiers {
		for _, c := range t.Analysis {
			if t.Tier == tier && c.Check == check {
				return c.Measurements, nil
			}
		}
	}
	return nil, nil
}

// Measured implements Plans.
func (p TemporalPlans) Measured(ctx context.Context, plan string, m meshapi.Measured) error {
	return p.signalCheck(ctx, plan, m.Check.Check, meshapi.SignalMeasured, m)
}

// Started implements Plans.
func (p TemporalPlans) Started(ctx context.Context, plan string, s meshapi.AnalysisStarted) error {
	return p.signalCheck(ctx, plan, s.Check.Check, meshapi.SignalAnalysisStarted, s)
}

// signalCheck signals plan about check; a plan that has ended took
// nothing, which is no error: nobody is left to show it to.
func (p TemporalPlans) signalCheck(ctx context.Context, plan, check, signal string, arg any) error {
	ended, err := p.signal(ctx, plan, signal, arg)
	if ended {
		p.Log.Warn().Str("plan", plan).Str("check", check).Str("signal", signal).Msg("plan did not take the signal: it has ended")
	}
	return err
}

// signal signals the workflow to (a plan or its relay). One that has ended
// took nothing, which is no error: it says so in ended, for its caller to
// say what was lost.
func (p TemporalPlans) signal(ctx context.Context, to, signal string, arg any) (ended bool, err error) {
	err = p.Client.SignalWorkflow(ctx, to, "", signal, arg)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return true, nil
	}
	return false, err
}

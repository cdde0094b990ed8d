package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/testsuite"

	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// eventually and poll bound the waits for another goroutine to get where a
// test needs it.
const (
	eventually = 10 * time.Second
	poll       = time.Millisecond
)

// bundleSent is one signal answerBundles asked for, held until the test
// says how it went.
type bundleSent struct {
	to    string
	b     meshapi.PushResults
	reply chan error
}

// heldSends is a send for answerBundles that hands each signal to the
// test and waits for its reply.
func heldSends() (func(context.Context, string, meshapi.PushResults) error, chan bundleSent) {
	calls := make(chan bundleSent)
	return func(_ context.Context, to string, b meshapi.PushResults) error {
		c := bundleSent{to: to, b: b, reply: make(chan error)}
		calls <- c
		return <-c.reply
	}, calls
}

// waitingFor is how many answers wait for the next bundle to to.
func (b *answerBundles) waitingFor(to string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.places[to])
}

func answerFor(to string, i int) meshapi.PushResult {
	return meshapi.PushResult{Request: fmt.Sprintf("%s/req-%d", to, i), Plan: to, Machine: fmt.Sprintf("m%d", i), Outcome: meshapi.MachineConverged, Bundle: true}
}

// A worker sends the answers going to one place one signal at a time, each
// carrying what came while the last was sent, at most AnswerBundle; a
// place waits for no other; each answer goes once and its push hears how
// its own bundle went.
func TestAnswersTravelInBundles(t *testing.T) {
	send, calls := heldSends()
	bundles := newAnswerBundles(send)
	const later = meshapi.AnswerBundle + 50
	results := make(chan error, later+2)
	answer := func(r meshapi.PushResult) {
		go func() { results <- bundles.Answer(context.Background(), r) }()
	}

	answer(answerFor("plan-a", 0))
	first := <-calls
	require.Equal(t, "plan-a", first.to)
	require.Len(t, first.b.Results, 1, "an answer with nothing being sent goes at once, alone")

	for i := 1; i <= later; i++ {
		answer(answerFor("plan-a", i))
	}
	answer(answerFor("plan-b", 0))
	other := <-calls
	require.Equal(t, "plan-b", other.to, "another place is not held up by plan-a's signal")
	other.reply <- nil
	require.NoError(t, <-results)
	require.Eventually(t, func() bool { return bundles.waitingFor("plan-a") == later }, eventually, poll)

	first.reply <- nil
	seen := map[string]int{}
	for _, r := range first.b.Results {
		seen[r.Request]++
	}
	var sizes []int
	for len(sizes) < 2 {
		c := <-calls
		require.Equal(t, "plan-a", c.to)
		sizes = append(sizes, len(c.b.Results))
		for _, r := range c.b.Results {
			seen[r.Request]++
		}
		c.reply <- nil
	}
	assert.Equal(t, []int{meshapi.AnswerBundle, later - meshapi.AnswerBundle}, sizes, "what came while one was sent, in bundles of at most AnswerBundle")
	for i := 0; i <= later; i++ {
		require.NoError(t, <-results)
		require.Equal(t, 1, seen[answerFor("plan-a", i).Request], "answer %d sent once", i)
	}
	require.Eventually(t, func() bool {
		bundles.mu.Lock()
		defer bundles.mu.Unlock()
		return len(bundles.places) == 0
	}, eventually, poll, "nothing left being sent")
}

// A bundle's failure is each of its pushes' (each retries and answers
// again); a push that stops waiting hears its own context's end, and its
// answer still goes with the next bundle.
func TestAnswerBundleFailures(t *testing.T) {
	send, calls := heldSends()
	bundles := newAnswerBundles(send)
	results := make(chan error, 3)
	go func() { results <- bundles.Answer(context.Background(), answerFor("plan", 0)) }()
	first := <-calls

	ctx, cancel := context.WithCancel(context.Background())
	go func() { results <- bundles.Answer(ctx, answerFor("plan", 1)) }()
	go func() { results <- bundles.Answer(context.Background(), answerFor("plan", 2)) }()
	require.Eventually(t, func() bool { return bundles.waitingFor("plan") == 2 }, eventually, poll)
	cancel()
	require.ErrorIs(t, <-results, context.Canceled, "the push that stopped waiting")

	lost := errors.New("deadline exceeded")
	first.reply <- nil
	require.NoError(t, <-results)
	next := <-calls
	require.Len(t, next.b.Results, 2, "the answer of the push that stopped waiting still goes")
	next.reply <- lost
	require.ErrorIs(t, <-results, lost, "the bundle's failure is its push's")
}

// answerSignals is a Temporal client that records the signals it is asked
// for, and answers NotFound for the workflows in gone; every other method
// panics through the nil interface it embeds.
type answerSignals struct {
	client.Client
	gone map[string]bool
	mu   sync.Mutex
	sent []string // "to signal answers"
}

func (s *answerSignals) SignalWorkflow(_ context.Context, to, _, signal string, arg any) error {
	n := 1
	if b, ok := arg.(meshapi.PushResults); ok {
		n = len(b.Results)
	}
	s.mu.Lock()
	s.sent = append(s.sent, fmt.Sprintf("%s %s %d", to, signal, n))
	s.mu.Unlock()
	if s.gone[to] {
		return serviceerror.NewNotFound("workflow execution already completed")
	}
	return nil
}

// An answer goes alone to a plan whose request does not say it takes
// bundles (a build before them, under Worker Versioning), and in a bundle
// otherwise; a plan or relay that has ended took nothing, which is not the
// push's failure.
func TestTemporalPlansAnswer(t *testing.T) {
	cases := []struct {
		name   string
		answer meshapi.PushResult
		gone   bool
		sent   string
	}{
		{name: "alone", answer: meshapi.PushResult{Request: "r", Plan: "plan"}, sent: "plan push-result 1"},
		{name: "in a bundle", answer: meshapi.PushResult{Request: "r", Plan: "plan", Bundle: true}, sent: "plan push-results 1"},
		{name: "to its relay", answer: meshapi.PushResult{Request: "r", Plan: "plan", ReplyTo: "plan/relay-0", Bundle: true}, sent: "plan/relay-0 push-results 1"},
		{name: "alone, plan ended", answer: meshapi.PushResult{Request: "r", Plan: "plan"}, gone: true, sent: "plan push-result 1"},
		{name: "in a bundle, relay ended", answer: meshapi.PushResult{Request: "r", Plan: "plan", ReplyTo: "plan/relay-0", Bundle: true}, gone: true, sent: "plan/relay-0 push-results 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sig := &answerSignals{gone: map[string]bool{c.answer.AnswerTo(): c.gone}}
			p := NewTemporalPlans(sig, zerolog.Nop())
			require.NoError(t, p.Answer(context.Background(), c.answer))
			require.Equal(t, []string{c.sent}, sig.sent)
		})
	}
}

// handed is a Temporal client that records the push requests handed to
// machine workflows (signal-with-start); every other method panics through
// the nil interface it embeds.
type handed struct {
	client.Client
	mu   sync.Mutex
	reqs []meshapi.PushRequest
}

func (h *handed) SignalWithStartWorkflow(_ context.Context, _, _ string, arg any, _ client.StartWorkflowOptions, _ any, _ ...any) (client.WorkflowRun, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reqs = append(h.reqs, arg.(meshapi.PushRequest))
	return nil, nil
}

// The handing worker says its requests' answers may travel in bundles:
// its build runs the plan and relays that take them.
func TestHandedRequestsTakeBundles(t *testing.T) {
	h := &handed{}
	a := &Activities{Mesh: &config.Config{}, Temporal: h, Log: zerolog.Nop()}
	env := (&testsuite.WorkflowTestSuite{}).NewTestActivityEnvironment()
	env.RegisterActivity(a)
	in := meshapi.HandPushesInput{Requests: []meshapi.PushRequest{{Request: "r1", Plan: "plan", Machine: "edge-1"}, {Request: "r2", Plan: "plan", Machine: "edge-2"}}}
	_, err := execute[meshapi.HandPushesResult](t, env, a.HandPushes, in)
	require.NoError(t, err)
	require.Len(t, h.reqs, 2)
	for _, r := range h.reqs {
		assert.True(t, r.Bundles, "request %s", r.Request)
		assert.True(t, meshapi.ResultOf(r, meshapi.MachineConverged, "").Bundle, "its answer, %s", r.Request)
	}
}

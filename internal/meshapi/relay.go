package meshapi

import (
	"fmt"
	"time"
)

// A relay stands between a large plan and its machines' answers. A plan
// hears each answer as a signal, one event of its history, and Temporal
// refuses a run's signals past 10,000: a plan that heard every machine
// itself grew with the fleet and could not push more than about 9,000
// machines. A plan of more than RelayAbove machines starts one relay (a
// child workflow) per RelaySize requests of each hand-over; the machines
// answer the relay (PushRequest.ReplyTo), and the relay passes their answers
// on in bundles (SignalPushResults), so that the plan's history grows with
// bundles, not machines.
const (
	// RelayWorkflowType is the relay's registered workflow type.
	RelayWorkflowType = "Relay"
	// SignalPushResults carries PushResults, a bundle of answers, from a
	// relay to its plan, and from a worker to a plan or relay (see
	// AnswerBundle).
	SignalPushResults = "push-results"
	// AnswerBundle is the most answers a worker sends in one signal. A
	// worker sends the answers of its pushes to one plan or relay one
	// signal at a time, each carrying what came while the last was sent:
	// a thousand pushes ending together cost a few signals, not a thousand
	// at once, which at 10,000 machines outran the dev server until its
	// store failed every query.
	AnswerBundle = 100

	// RelayAbove is the most machines a plan hears itself by default
	// (push.relay_above). Relays cost a plan time: on the task queue the
	// machine workflows share, measured at 3,000 machines, a relay's task
	// waited seconds to a minute and plans took longer than plans heard
	// directly (they have their own queue since, RelayTaskQueue, not yet
	// measured at that size), while a plan of up to 5,000 machines heard
	// directly stays within Temporal's history warnings (about 7,000
	// events) and its signal limit. Relays are for plans larger than that.
	RelayAbove = 5000
	// RelaySize is the most requests one relay waits for.
	RelaySize = 1000
	// RelayBundle is how many answers a relay passes on at once when they
	// arrive faster than RelayWait.
	RelayBundle = 100
	// RelayWait is how long a relay keeps an answer before passing on what
	// it holds, so that a plan's progress shows within a second or so.
	RelayWait = time.Second
	// RelayWaits is how many times a relay passes answers on after
	// RelayWait; then it waits for a full bundle or its last answer, so
	// that answers trickling in cannot cost the plan one signal each.
	RelayWaits = 10
)

// RelayInput is what a relay waits for: the answers to Requests (request
// IDs), which it passes on to Plan.
type RelayInput struct {
	Plan     string   `json:"plan"`
	Requests []string `json:"requests"`
}

// RelayResult says what a relay passed on, for the Web UI and tests.
type RelayResult struct {
	// Answers is how many answers it passed on, Bundles in how many
	// signals.
	Answers int `json:"answers"`
	Bundles int `json:"bundles"`
}

// PushResults is a bundle of answers a relay passes on to its plan.
type PushResults struct {
	Results []PushResult `json:"results"`
}

// RelayTaskQueue is where a plan's relays run: a queue of their own beside
// the worker's (taskQueue), polled by the same workers, so that a relay's
// tasks never wait behind the machine workflows' (at 3,000 machines, on the
// shared queue, a relay's task waited up to 75 s while its answers
// buffered).
func RelayTaskQueue(taskQueue string) string { return taskQueue + "-relays" }

// RelayID is the workflow ID of a plan's nth relay: made from the plan's ID
// so that the Web UI lists it under its plan's name.
func RelayID(plan string, n int) string { return fmt.Sprintf("%s/relay-%d", plan, n) }

// RelayedSignals is the most signals a plan can hear for one hand-over of n
// requests when its answers are relayed: per relay of up to RelaySize
// requests, a bundle per RelayBundle answers, RelayWaits more, and its
// last; never more than one per answer.
func RelayedSignals(n int) int {
	signals := 0
	for from := 0; from < n; from += RelaySize {
		part := min(n-from, RelaySize)
		signals += min(part, (part+RelayBundle-1)/RelayBundle+RelayWaits+1)
	}
	return signals
}

// Package analysis takes one measurement of an analysis check (issue 18)
// and judges a series of them. It is the part of an analysis gate that
// talks to the outside world and decides, kept apart from the workflow that
// will schedule it: a heartbeating activity can call Measure once per
// interval, keep the measurements in its heartbeat (so a worker killed
// mid-bake resumes without losing them) and ask Judge after each one.
//
// Nothing here returns a Go error for a bad measurement. A provider that
// is down, answers 500, answers something that is not JSON, or a success
// expression that fails at run time all come back as a Measurement with
// Error set: the caller counts those against its retry budget and, past
// it, holds the plan as inconclusive, which is a different outcome from a
// failed check and must not be confused with one.
package analysis

import (
	"time"

	"github.com/meshroll/meshroll/internal/config"
)

// Measurement is one look at a check, as a plan's state will keep it and
// plan show will print it: when, what was read, and whether it was good.
type Measurement struct {
	// At is the time the measurement is for (Prometheus evaluates the
	// query at it).
	At time.Time `json:"at"`
	// Value is what was read: a float64 (a Prometheus scalar or a vector
	// of one sample), a []float64 (a vector of several), or a decoded JSON
	// value (a web provider). Nil when nothing was read.
	Value any `json:"value,omitempty"`
	// Passed is the success expression's verdict; false when Error is
	// set.
	Passed bool `json:"passed"`
	// Error says why nothing could be judged (the provider unreachable,
	// no data, an expression that failed on this value). Such a
	// measurement is neither a pass nor a failure.
	Error string `json:"error,omitempty"`
}

// Verdict is where a check stands after its measurements so far.
type Verdict string

// The verdicts. Judge returns Running, Passed or Failed; Inconclusive is
// the caller's, when error measurements exhaust its retry budget, since
// how many errors to tolerate is a matter of time and patience, not of the
// check's counts.
const (
	// Running: more measurements are needed.
	Running Verdict = "running"
	// Passed: Count good measurements without exceeding FailureLimit; the
	// tier may go on.
	Passed Verdict = "passed"
	// Failed: more than FailureLimit measurements failed; the plan halts
	// (unless the check is a dry run).
	Failed Verdict = "failed"
	// Inconclusive: the check could not be measured; a person decides.
	Inconclusive Verdict = "inconclusive"
)

// Judge says where check c stands after measurements ms: Failed as soon as
// the failed ones (judged, and not passed) exceed FailureLimit, Passed once
// Count judged measurements are in without that, Running before. A
// measurement with Error set is skipped: it says nothing about the build,
// so it neither brings the check closer to passing nor to failing.
func Judge(c config.Check, ms []Measurement) Verdict {
	judged, failed := 0, 0
	for _, m := range ms {
		if m.Error != "" {
			continue
		}
		judged++
		if !m.Passed {
			failed++
		}
	}
	switch {
	case failed > c.FailureLimit:
		return Failed
	case judged >= c.Count:
		return Passed
	}
	return Running
}

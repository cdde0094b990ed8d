// Package analysis takes one measurement of an analysis check (issue 18)
// and judges a series of them. It is the part of an analysis gate that
// talks to the outside world and decides, kept apart from the Temporal
// code that schedules it: the Analyse activity (package activities) calls
// Measure once per interval, keeps the measurements in its heartbeat (so a
// worker killed mid-bake resumes without losing them) and asks Judge after
// each one. Measurements and verdicts are meshapi's, the shapes a plan's
// state keeps.
//
// Nothing here returns a Go error for a bad measurement. A provider that
// is down, answers 500, answers something that is not JSON, or a success
// expression that fails at run time all come back as a measurement with
// Error set: the caller counts those in a row and, past ErrorLimit, holds
// the plan as inconclusive, which is a different outcome from a
// failed check and must not be confused with one.
package analysis

import (
	"github.com/meshroll/meshroll/internal/config"
	"github.com/meshroll/meshroll/internal/meshapi"
)

// ErrorLimit is how many error measurements in a row (nothing could be
// judged: the provider unreachable, no data) a check tolerates: one more
// makes it inconclusive, and the plan waits at a gate for a person. It is
// Argo Rollouts' consecutiveErrorLimit default, which operators coming from
// it expect: at a minute's interval, five minutes of a provider down is an
// outage to look at, not a blip to wait out. Errors between good or failed
// measurements do not add up: only a run of them does, since a provider
// that answers now and then is still measuring the build.
const ErrorLimit = 4

// ErrorsInARow counts the error measurements at the end of ms: the run
// that ErrorLimit bounds.
func ErrorsInARow(ms []meshapi.Measurement) int {
	n := 0
	for i := len(ms) - 1; i >= 0 && ms[i].Error != ""; i-- {
		n++
	}
	return n
}

// Judge says where check c stands after measurements ms: AnalysisFailed as
// soon as the failed ones (judged, and not passed) exceed FailureLimit,
// AnalysisPassed once Count judged measurements are in without that,
// AnalysisRunning before. A measurement with Error set is skipped: it says
// nothing about the build, so it neither brings the check closer to
// passing nor to failing. Inconclusive is the caller's verdict, when more
// than ErrorLimit errors come in a row: how many to tolerate is a matter
// of time and patience, not of the check's counts.
func Judge(c config.Check, ms []meshapi.Measurement) meshapi.Verdict {
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
		return meshapi.AnalysisFailed
	case judged >= c.Count:
		return meshapi.AnalysisPassed
	}
	return meshapi.AnalysisRunning
}

package meshapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/meshroll/meshroll/internal/mesh"
)

// SignalMeasured carries a Measured from a running Analyse activity to its
// plan, one per measurement, so that plan show, plan watch, the Web UI and
// the fleet page see each measurement as it is taken, not only when the
// check ends. The plan ignores one it already has (a retried activity
// resends nothing it heartbeated, but a lost signal's retry may).
const SignalMeasured = "measured"

// SignalAnalysisStarted carries an AnalysisStarted from an Analyse activity
// to its plan before its first measurement, so that a check waiting out a
// long initial delay shows what it will ask and when it starts measuring,
// not "0 of 0". It is a signal of its own, not a measured signal without a
// measurement: a plan of the code before it ignores it.
const SignalAnalysisStarted = "analysis-started"

// Measurement is one look at an analysis check, as a plan's state keeps it
// and plan show prints it: when, what was read, and whether it was good.
type Measurement struct {
	// At is the time the measurement is for (Prometheus evaluates the
	// query at it).
	At time.Time `json:"at"`
	// Value is what was read: a number (a Prometheus scalar or a vector
	// of one sample), a list of numbers (a vector of several), or a JSON
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

// Verdict says how the measurement's value was judged, in one word:
// passed, failed or error.
func (m Measurement) Verdict() string {
	switch {
	case m.Error != "":
		return "error"
	case m.Passed:
		return "passed"
	}
	return "failed"
}

// valueWordsMax bounds a measured value in words: a web provider's JSON
// document can be any size, and it lands in a plan's reason and on one line
// of plan watch.
const valueWordsMax = 120

// ValueWords is the measurement's value as plan show prints it: a number
// as it reads, a list or JSON value as compact JSON (the form the provider
// answered in, not Go's map[...] syntax) cut to valueWordsMax characters,
// "-" when nothing was read.
func (m Measurement) ValueWords() string {
	switch v := m.Value.(type) {
	case nil:
		return "-"
	case float64:
		return fmt.Sprintf("%.4g", v)
	}
	return ShortJSON(m.Value, valueWordsMax)
}

// ShortJSON is v as compact JSON cut to limit characters, "…" marking a
// cut: a value read from a provider, as a person reads it in a reason or
// an error, whatever its size.
func ShortJSON(v any, limit int) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if r := []rune(string(b)); len(r) > limit {
		return string(r[:limit]) + "…"
	}
	return string(b)
}

// Verdict is where an analysis check stands.
type Verdict string

// The verdicts of a check.
const (
	// AnalysisWaiting: the check has not started (its tier is not yet
	// healthy, or its initial delay runs).
	AnalysisWaiting Verdict = "waiting"
	// AnalysisRunning: more measurements are needed.
	AnalysisRunning Verdict = "running"
	// AnalysisPassed: Count good measurements without exceeding
	// FailureLimit failed ones; the tier may go on.
	AnalysisPassed Verdict = "passed"
	// AnalysisFailed: more than FailureLimit measurements failed; the
	// plan halts and the tier is put back (unless the check is a dry
	// run).
	AnalysisFailed Verdict = "failed"
	// AnalysisInconclusive: the check could not be measured (its provider
	// unreachable past ErrorLimit measurements in a row, no data); the
	// plan waits at a gate for a person.
	AnalysisInconclusive Verdict = "inconclusive"
	// AnalysisApproved: an inconclusive check a person passed with
	// starter plan approve.
	AnalysisApproved Verdict = "approved"
	// AnalysisCancelled: the plan stopped the check (another check
	// failed, the bake failed, the plan was aborted).
	AnalysisCancelled Verdict = "cancelled"
)

// Decided reports whether the verdict lets the tier go on (passed, or
// approved by a person).
func (v Verdict) Decided() bool { return v == AnalysisPassed || v == AnalysisApproved }

// AnalysisCheck is one check as it ran for a tier: what it asked of its
// measurements (from the worker's config when it started, so that plan
// show can say "3 of 10") and the measurements themselves.
type AnalysisCheck struct {
	// Check is the check's name under analysis.checks.
	Check string `json:"check"`
	// Provider names the provider it read.
	Provider string `json:"provider,omitempty"`
	// Query is the query as sent (the template executed), for the person
	// who wants to run it themselves.
	Query string `json:"query,omitempty"`
	// Success is the success expression.
	Success      string        `json:"success,omitempty"`
	Interval     time.Duration `json:"interval,omitempty"`
	Count        int           `json:"count,omitempty"`
	FailureLimit int           `json:"failure_limit,omitempty"`
	DryRun       bool          `json:"dry_run,omitempty"`
	Verdict      Verdict       `json:"verdict"`
	// Reason says why the check failed or was inconclusive, or who passed
	// it.
	Reason       string        `json:"reason,omitempty"`
	Measurements []Measurement `json:"measurements,omitempty"`
	// FirstDue, while the check waits out its initial delay, is when it
	// takes its first measurement.
	FirstDue *time.Time `json:"first_due,omitempty"`
}

// Tally counts the check's measurements by how they were judged.
func (c AnalysisCheck) Tally() (passed, failed, errored int) {
	for _, m := range c.Measurements {
		switch m.Verdict() {
		case "passed":
			passed++
		case "failed":
			failed++
		default:
			errored++
		}
	}
	return passed, failed, errored
}

// Summary is the check in one line, for plan show, plan watch and the Web
// UI: "error-rate passed: 10 of 10 measured, 1 failed of 1 allowed, last
// 0.02". Measured counts the judged measurements (good and failed), which
// is what reaching Count takes; those that could not be measured are
// counted apart.
func (c AnalysisCheck) Summary() string {
	passed, failed, errored := c.Tally()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", c.Check, c.Verdict)
	if c.Verdict == AnalysisWaiting && c.FirstDue != nil {
		b.WriteString(" until " + c.FirstDue.UTC().Format("15:04:05 MST"))
	}
	if c.DryRun {
		b.WriteString(" (dry run)")
	}
	fmt.Fprintf(&b, ": %d of %d measured, %d failed of %d allowed", passed+failed, c.Count, failed, c.FailureLimit)
	if errored > 0 {
		fmt.Fprintf(&b, ", %d could not be measured", errored)
	}
	if n := len(c.Measurements); n > 0 {
		b.WriteString(", last " + c.Measurements[n-1].ValueWords())
	}
	if c.Reason != "" {
		b.WriteString("; " + c.Reason)
	}
	return b.String()
}

// Add records m unless the check already has a measurement at m's time
// (a resent signal), keeping them in time order; it reports whether m was
// new.
func (c *AnalysisCheck) Add(m Measurement) bool {
	for _, have := range c.Measurements {
		if have.At.Equal(m.At) {
			return false
		}
	}
	c.Measurements = append(c.Measurements, m)
	return true
}

// AnalyseInput asks the Analyse activity to run one check for a tier: to
// measure it every interval until it passes, fails or cannot be measured.
type AnalyseInput struct {
	Plan  string     `json:"plan"`
	Build mesh.Build `json:"build"`
	Tier  int        `json:"tier"`
	// Machines are the tier's machines that took the build, sorted.
	Machines []string `json:"machines"`
	Check    string   `json:"check"`
	// Since is when the tier's machines were all healthy: the initial
	// delay counts from it, so that a retried activity does not wait it
	// again.
	Since time.Time `json:"since"`
}

// AnalyseResult is the check as it ended: passed, failed or inconclusive,
// with every measurement. A failed check is a result, not an error: what
// to do about it (halt and put the tier back, or only report a dry run) is
// the plan's.
type AnalyseResult struct {
	Check AnalysisCheck `json:"check"`
}

// Measured is one measurement of a running check, signalled to its plan
// (SignalMeasured). The first one of a check also carries what the check
// asks (Check without measurements), for the plan to show "1 of 10".
type Measured struct {
	Tier        int           `json:"tier"`
	Check       AnalysisCheck `json:"check"`
	Measurement Measurement   `json:"measurement"`
}

// AnalysisStarted tells a plan what one of its checks asks (Check, without
// measurements) before the check's first measurement
// (SignalAnalysisStarted): verdict waiting and FirstDue while its initial
// delay runs, else running.
type AnalysisStarted struct {
	Tier  int           `json:"tier"`
	Check AnalysisCheck `json:"check"`
}

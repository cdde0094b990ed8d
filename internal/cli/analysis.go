package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/meshroll/meshroll/internal/meshapi"
)

// DefaultMeasurements is how many of a check's latest measurements "plan
// show" lists unless --measurements says otherwise, and the most "plan
// watch" prints at once when it first sees a check that already has more:
// enough to see a trend, few enough that a long bake does not bury the
// tiers.
const DefaultMeasurements = 10

// measurementLimit is the --measurements flag: a number of latest
// measurements per check (0 for none, only the check's line), or "all".
// It is a flag of its own type so that "all" reads as it is said, where
// --journal N (machine show) needs no such word.
type measurementLimit struct {
	n   int
	all bool
}

func (l *measurementLimit) String() string {
	if l.all {
		return "all"
	}
	return strconv.Itoa(l.n)
}

func (l *measurementLimit) Set(s string) error {
	if strings.EqualFold(strings.TrimSpace(s), "all") {
		l.n, l.all = 0, true
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return fmt.Errorf("want a number of measurements (0 or more) or all")
	}
	l.n, l.all = n, false
	return nil
}

func (l *measurementLimit) Type() string { return "N|all" }

// shown splits a check's measurements into how many are left out (the
// earliest) and the latest ones the limit lets through.
func (l measurementLimit) shown(ms []meshapi.Measurement) (earlier int, latest []meshapi.Measurement) {
	if l.all || len(ms) <= l.n {
		return 0, ms
	}
	return len(ms) - l.n, ms[len(ms)-l.n:]
}

// measurementClock is how a measurement's time is printed: UTC, to the
// second, as the worker's log and Prometheus' graph show it.
const measurementClock = "15:04:05"

// writeAnalysis is plan show's block under a tier with checks: each
// check's line (its verdict and tally), the query it sends, and its
// measurements, the latest as limit lets through and a line saying how
// many earlier ones were left out.
func writeAnalysis(b *strings.Builder, t meshapi.TierState, limit measurementLimit) error {
	for _, c := range t.Analysis {
		fmt.Fprintf(b, "  tier %d check %s\n", t.Tier, oneLine(c.Summary()))
		if c.Query != "" {
			provider := ""
			if c.Provider != "" {
				provider = " (" + c.Provider + ")"
			}
			fmt.Fprintf(b, "    query%s: %s\n", provider, oneLine(c.Query))
		}
		earlier, latest := limit.shown(c.Measurements)
		if len(latest) == 0 {
			if earlier > 0 {
				fmt.Fprintf(b, "    %d %s (--measurements to list them)\n", earlier, plural(earlier, "measurement", "measurements"))
			}
			continue
		}
		var table strings.Builder
		tw := tabwriter.NewWriter(&table, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "    TIME (UTC)\tVALUE\tVERDICT\tERROR")
		for _, m := range latest {
			fmt.Fprintf(tw, "    %s\t%s\t%s\t%s\n", m.At.UTC().Format(measurementClock), oneLine(m.ValueWords()), m.Verdict(), dash(oneLine(m.Error)))
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
		// The line of the earlier ones goes under the header, where they
		// would be, outside the tabwriter: a line without cells would
		// break the columns' alignment.
		header, rows, _ := strings.Cut(table.String(), "\n")
		b.WriteString(header + "\n")
		if earlier > 0 {
			fmt.Fprintf(b, "    … %d earlier\n", earlier)
		}
		b.WriteString(rows)
	}
	return nil
}

// analysisKey names a check within a plan for the progress printer.
func analysisKey(tier int, check string) string { return strconv.Itoa(tier) + "/" + check }

// analysisLines are the progress lines of a tier's checks since the
// printer last saw them: one per new measurement ("tier 1 error-rate:
// 0.012 passed (3 of 10)"), then the check's line when its verdict moved
// ("tier 1 check error-rate passed: 10 of 10 measured, ..."). A check first
// seen with more than DefaultMeasurements prints the latest of them after
// a line counting the earlier.
func (p *progressPrinter) analysisLines(t meshapi.TierState) []string {
	var out []string
	for _, c := range t.Analysis {
		key := analysisKey(t.Tier, c.Check)
		seen := p.lastMeasured[key]
		if seen > len(c.Measurements) {
			seen = 0 // a state that lost measurements: print them afresh
		}
		from := seen
		if n := len(c.Measurements) - seen; n > DefaultMeasurements {
			from = len(c.Measurements) - DefaultMeasurements
			out = append(out, fmt.Sprintf("tier %d %s: … %d earlier %s", t.Tier, c.Check, from-seen, plural(from-seen, "measurement", "measurements")))
		}
		for i := from; i < len(c.Measurements); i++ {
			out = append(out, measurementLine(t.Tier, c, i))
		}
		p.lastMeasured[key] = len(c.Measurements)
		if v, ok := p.lastVerdict[key]; !ok || v != c.Verdict {
			p.lastVerdict[key] = c.Verdict
			out = append(out, fmt.Sprintf("tier %d check %s", t.Tier, oneLine(c.Summary())))
		}
	}
	return out
}

// measurementLine is the i-th measurement of c as plan watch prints it:
// its value and verdict, and where the check stands after it: "(3 of 10)"
// measured of the count it needs, a failure against the failures allowed, or
// why nothing could be judged.
func measurementLine(tier int, c meshapi.AnalysisCheck, i int) string {
	m := c.Measurements[i]
	upTo := meshapi.AnalysisCheck{Measurements: c.Measurements[:i+1]}
	passed, failed, _ := upTo.Tally()
	line := fmt.Sprintf("tier %d %s: %s %s", tier, c.Check, oneLine(m.ValueWords()), m.Verdict())
	switch m.Verdict() {
	case "passed":
		return line + fmt.Sprintf(" (%d of %d)", passed+failed, c.Count)
	case "failed":
		return line + fmt.Sprintf(" (%d failed of %d allowed)", failed, c.FailureLimit)
	}
	return line + ": " + oneLine(m.Error)
}

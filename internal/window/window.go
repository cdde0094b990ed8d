// Package window is the calendar side of holding roll-outs: deployment
// windows from the mesh config, each a cron schedule of when it starts, how
// long it lasts, and the time zone the schedule is read in. An allow window
// is a time plans may push; a deny window a time they may not. Deny wins;
// when any allow window is given, plans push only inside one.
//
// Schedules are parsed by github.com/robfig/cron/v3 (five fields, or a
// descriptor such as @weekly), never by hand. Every answer takes the time
// it is asked at, so the math is tested with a fixed clock.
package window

import (
	"errors"
	"fmt"
	"strings"
	"time"
	// The zone database in the binary, so that a window's time zone reads
	// the same on a minimal container image as on a developer's machine.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// parser reads the standard five cron fields (minute, hour, day of month,
// month, day of week) and descriptors.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Window is one allow or deny window.
type Window struct {
	// Deny is true for a deny window, false for an allow window.
	Deny bool
	// Spec is the cron schedule of the window's starts, as written.
	Spec string
	// Duration is how long each start lasts: [start, start+Duration).
	Duration time.Duration
	// Zone is the time zone Spec is read in, as written ("" is UTC).
	Zone string
	// Reason is shown while a deny window holds a plan.
	Reason string

	sched cron.Schedule
}

// CheckSpec says why spec is not a schedule this package takes, or nil.
func CheckSpec(spec string) error {
	_, err := parse(spec)
	return err
}

// parse reads a calendar schedule. It refuses what robfig/cron takes but a
// window cannot use: a zone inside the spec (the window's time_zone says
// it; and cron v3.0.1 panics on "TZ=x" with nothing after it) and @every,
// which is a delay from whenever it is asked, not a time on the calendar.
// A panic in the parser on some other input is an error, not a crash of
// the worker or the starter reading the config.
func parse(spec string) (sched *cron.SpecSchedule, err error) {
	trimmed := strings.TrimSpace(spec)
	switch {
	case strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ="):
		return nil, errors.New("give the time zone in time_zone, not in the schedule")
	case strings.HasPrefix(trimmed, "@every"):
		return nil, errors.New("@every is a delay, not a time on the calendar; use five fields or @hourly, @daily, @weekly, @monthly, @yearly")
	}
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("cannot parse %q: %v", spec, r)
		}
	}()
	s, err := parser.Parse(spec)
	if err != nil {
		return nil, err
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%q is not a calendar schedule", spec)
	}
	return ss, nil
}

// CheckZone says why zone is not a time zone this package takes, or nil.
func CheckZone(zone string) error {
	_, err := time.LoadLocation(zone)
	return err
}

// New checks and parses a window: the spec must parse, the zone must be
// known, and the duration must be positive.
func New(deny bool, spec string, duration time.Duration, zone, reason string) (Window, error) {
	w := Window{Deny: deny, Spec: spec, Duration: duration, Zone: zone, Reason: reason}
	var errs []error
	loc := time.UTC
	if zone != "" {
		l, err := time.LoadLocation(zone)
		if err != nil {
			errs = append(errs, fmt.Errorf("time zone %q: %w", zone, err))
		} else {
			loc = l
		}
	}
	if ss, err := parse(spec); err != nil {
		errs = append(errs, fmt.Errorf("schedule %q: %w", spec, err))
	} else {
		ss.Location = loc
		w.sched = ss
	}
	if duration <= 0 {
		errs = append(errs, fmt.Errorf("duration %s: must be above zero", duration))
	}
	return w, errors.Join(errs...)
}

// kind is "deny" or "allow".
func (w Window) kind() string {
	if w.Deny {
		return "deny"
	}
	return "allow"
}

// String is the window as written, for logs and reasons.
func (w Window) String() string {
	s := fmt.Sprintf("%s %q for %s", w.kind(), w.Spec, w.Duration)
	if w.Zone != "" {
		s += " in " + w.Zone
	}
	return s
}

// Contains reports whether t is inside one of the window's occurrences,
// and when the latest of those containing t ends.
func (w Window) Contains(t time.Time) (bool, time.Time) {
	// The starts in (t-Duration, t] are the occurrences containing t.
	in, end := false, time.Time{}
	for s := w.sched.Next(t.Add(-w.Duration)); !s.IsZero() && !s.After(t); s = w.sched.Next(s) {
		in, end = true, s.Add(w.Duration)
	}
	return in, end
}

// Set is a mesh's windows. The zero Set allows any time.
type Set []Window

// maxSteps bounds the search for the next opening: each step passes one
// window occurrence, so a year of hourly windows is well inside it.
const maxSteps = 20000

// ErrNeverOpens is returned when the windows allow no time in the year
// after the time asked (a deny window that always applies, say).
var ErrNeverOpens = errors.New("the deployment windows allow no time within a year")

// Allowed reports whether plans may push at t: inside no deny window, and
// inside an allow window if there are any. When they may not, deny is the
// deny window that holds (nil when it is the lack of an allow window).
func (s Set) Allowed(t time.Time) (ok bool, deny *Window) {
	allows, inAllow := false, false
	for i := range s {
		w := &s[i]
		in, _ := w.Contains(t)
		if w.Deny && in {
			return false, w
		}
		if !w.Deny {
			allows = true
			inAllow = inAllow || in
		}
	}
	return !allows || inAllow, nil
}

// OpensAt is when plans may next push, from t: t itself when they may now.
// It steps from one window's edge to the next (the end of the deny windows
// that hold, or the next start of an allow window) until every window
// agrees, so overlapping windows are handled as they fall.
func (s Set) OpensAt(t time.Time) (time.Time, error) {
	limit := t.AddDate(1, 0, 0)
	cur := t
	for range maxSteps {
		if cur.After(limit) {
			break
		}
		ok, deny := s.Allowed(cur)
		if ok {
			return cur, nil
		}
		if deny != nil {
			_, end := deny.Contains(cur)
			cur = end
			continue
		}
		var next time.Time
		for _, w := range s {
			if w.Deny {
				continue
			}
			if n := w.sched.Next(cur); !n.IsZero() && (next.IsZero() || n.Before(next)) {
				next = n
			}
		}
		if next.IsZero() {
			break
		}
		cur = next
	}
	return time.Time{}, fmt.Errorf("from %s: %w", t.UTC().Format(time.RFC3339), ErrNeverOpens)
}

package machines

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/fleetwatch"
)

// Picture reads the fleet's picture of its hosts: what the worker's watcher
// (package fleetwatch) last heard from each, kept in the catalogue. List
// and ReadStatus read the hosts from it in one read rather than asking
// every host; nil makes them ask every host directly, as a starter that
// cannot reach the catalogue must.
type Picture func(context.Context) ([]catalogue.HostState, error)

// More host statuses of a Row, from the picture.
const (
	// HostStale is a host the worker has not heard for longer than
	// fleetwatch.StaleAfter, with no error to say why: the host hangs, or
	// no worker watches it.
	HostStale = "stale"
	// HostUnknown is a host the picture has nothing of yet (no worker has
	// heard it: the worker is not running, or the machine was just added),
	// or a picture that could not be read.
	HostUnknown = "unknown"
)

// errNoEntry is a machine the picture has nothing of.
var errNoEntry = errors.New("not in the fleet picture yet: no worker has heard this host " +
	"(is the worker running? was the machine just added to the mesh config?)")

// pictured sets r's host part from h, the picture's entry for it, as of
// now: a host that answered lately gives its report; one failing gives
// its error since when; one silent too long is stale.
func (r *reading) pictured(h catalogue.HostState, now time.Time) {
	heard := h.HeardAt
	if !heard.IsZero() {
		r.heard = &heard
	}
	switch {
	case h.Error != "":
		since := now
		if h.ErrorSince != nil {
			since = *h.ErrorSince
		}
		r.hostErr = fmt.Errorf("unreachable since %s (%s ago), %s: %s", clock(since), ago(now, since), lastHeard(h), h.Error)
		r.status, r.errSince = HostUnreachable, &since
	case h.Report == nil:
		r.hostErr, r.status = errNoEntry, HostUnknown
	case now.Sub(heard) > fleetwatch.StaleAfter:
		r.hostErr = fmt.Errorf("silent: %s, longer than the %s a watched host goes between answers; "+
			"the host hangs, or no worker is watching it (is the worker running?)", lastHeard(h), fleetwatch.StaleAfter)
		r.status, r.errSince = HostStale, &heard
	default:
		r.rep = *h.Report
	}
}

// lastHeard words when h was last heard.
func lastHeard(h catalogue.HostState) string {
	if h.HeardAt.IsZero() {
		return "never heard"
	}
	return "last heard at " + clock(h.HeardAt)
}

// Freshness words how old a row's host part is, as of now: "heard 3s ago",
// "asked now" for a host read directly, "-" when it was not heard.
func freshness(heard *time.Time, now time.Time, direct bool) string {
	switch {
	case direct:
		return "asked now"
	case heard == nil:
		return "-"
	}
	return "heard " + ago(now, *heard) + " ago"
}

// ago is now - t to the second, never below 0s.
func ago(now, t time.Time) string {
	return max(now.Sub(t), 0).Round(time.Second).String()
}

// clock is t in UTC as an operator reads it in a log.
func clock(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

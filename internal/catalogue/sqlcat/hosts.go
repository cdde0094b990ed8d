package sqlcat

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
)

// The picture's writes are each one statement whose conditions keep every
// time moving forward and the newest revision stored, so that watchers on
// several workers may write in any order: heard_at only grows, an error
// is cleared only by a later answer, and a report only by a newer revision.

// heardLater and clearOlderError are the SET clauses of an answer heard at
// $at: heard_at moves on, never back, and an error from before it goes.
const (
	heardLater = `heard_at = CASE WHEN host_reports.heard_at IS NULL OR host_reports.heard_at < %[1]s THEN %[1]s ELSE host_reports.heard_at END`
	clearError = `error = CASE WHEN host_reports.error_at < %[1]s THEN '' ELSE host_reports.error END,
		error_since = CASE WHEN host_reports.error_at < %[1]s THEN NULL ELSE host_reports.error_since END,
		error_at = CASE WHEN host_reports.error_at < %[1]s THEN NULL ELSE host_reports.error_at END`
)

// RecordHostReport implements catalogue.Catalogue with one upsert whose
// WHERE refuses an older revision.
func (c *Catalogue) RecordHostReport(ctx context.Context, machine string, rep mesh.Report, rev uint64, at time.Time) (bool, error) {
	op := "record the report of " + machine
	if rev > math.MaxInt64 {
		return false, fmt.Errorf("%s: revision %d is beyond what the catalogue stores", op, rev)
	}
	body, err := json.Marshal(rep)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	res, err := c.db.ExecContext(ctx, fmt.Sprintf(
		`INSERT INTO host_reports (machine, revision, report, changed_at, heard_at) VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (machine) DO UPDATE SET revision = excluded.revision, report = excluded.report,
			changed_at = excluded.changed_at, `+heardLater+`, `+clearError+`
		WHERE host_reports.report IS NULL OR excluded.revision > host_reports.revision OR excluded.revision = 0`,
		"excluded.heard_at"),
		machine, int64(rev), string(body), c.d.timeArg(at.UTC().Truncate(time.Microsecond)))
	if err != nil {
		return false, c.fail(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, c.fail(op, err)
	}
	return n > 0, nil
}

// HostsHeard implements catalogue.Catalogue: one UPDATE for every machine,
// the list passed as one JSON array.
func (c *Catalogue) HostsHeard(ctx context.Context, machines []string, at time.Time) error {
	if len(machines) == 0 {
		return nil
	}
	list, err := json.Marshal(machines)
	if err != nil {
		return fmt.Errorf("mark %d hosts heard: %w", len(machines), err)
	}
	_, err = c.db.ExecContext(ctx, fmt.Sprintf(
		`UPDATE host_reports SET `+heardLater+`, `+clearError+`
		WHERE report IS NOT NULL AND machine IN (`+c.d.jsonTexts+`)`, "$1", "$2"),
		c.d.timeArg(at.UTC().Truncate(time.Microsecond)), string(list))
	if err != nil {
		return c.fail(fmt.Sprintf("mark %d hosts heard", len(machines)), err)
	}
	return nil
}

// RecordHostError implements catalogue.Catalogue with one upsert that
// keeps error_since and drops an error older than the host's last answer.
func (c *Catalogue) RecordHostError(ctx context.Context, machine, msg string, at time.Time) error {
	_, err := c.db.ExecContext(ctx,
		`INSERT INTO host_reports (machine, error, error_since, error_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (machine) DO UPDATE SET error = excluded.error, error_at = excluded.error_at,
			error_since = COALESCE(host_reports.error_since, excluded.error_since)
		WHERE host_reports.heard_at IS NULL OR host_reports.heard_at < excluded.error_at`,
		machine, msg, c.d.timeArg(at.UTC().Truncate(time.Microsecond)))
	if err != nil {
		return c.fail("record the error of "+machine, err)
	}
	return nil
}

// HostStates implements catalogue.Catalogue.
func (c *Catalogue) HostStates(ctx context.Context) ([]catalogue.HostState, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT machine, revision, report, changed_at, heard_at, error, error_since, error_at
		FROM host_reports ORDER BY machine`)
	if err != nil {
		return nil, c.fail("read the hosts' picture", err)
	}
	defer rows.Close()
	var out []catalogue.HostState
	for rows.Next() {
		var h catalogue.HostState
		var rev int64
		var report *string
		var since, errAt time.Time
		if err := rows.Scan(&h.Machine, &rev, &report, nullTimeScanner{&h.ChangedAt}, nullTimeScanner{&h.HeardAt},
			&h.Error, nullTimeScanner{&since}, nullTimeScanner{&errAt}); err != nil {
			return nil, c.fail("read the hosts' picture", err)
		}
		h.Revision = uint64(rev)
		if report != nil {
			h.Report = new(mesh.Report)
			if err := json.Unmarshal([]byte(*report), h.Report); err != nil {
				return nil, fmt.Errorf("read the hosts' picture: the report of %s: %w", h.Machine, err)
			}
		}
		if !since.IsZero() {
			h.ErrorSince = &since
		}
		if !errAt.IsZero() {
			h.ErrorAt = &errAt
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail("read the hosts' picture", err)
	}
	return out, nil
}

// KeepMachineFeed implements catalogue.Catalogue with one upsert (or, with
// no body, one update) whose WHERE drops an older asOf.
func (c *Catalogue) KeepMachineFeed(ctx context.Context, asOf time.Time, body []byte) error {
	at := c.d.timeArg(asOf.UTC().Truncate(time.Microsecond))
	var err error
	if body == nil {
		_, err = c.db.ExecContext(ctx, `UPDATE machine_feed SET as_of = $1 WHERE id = 1 AND as_of <= $1`, at)
	} else {
		_, err = c.db.ExecContext(ctx, `INSERT INTO machine_feed (id, as_of, summaries) VALUES (1, $1, $2)
			ON CONFLICT (id) DO UPDATE SET as_of = excluded.as_of, summaries = excluded.summaries
			WHERE machine_feed.as_of <= excluded.as_of`, at, string(body))
	}
	if err != nil {
		return c.fail("keep the machine workflows' feed", err)
	}
	return nil
}

// MachineFeed implements catalogue.Catalogue.
func (c *Catalogue) MachineFeed(ctx context.Context) (time.Time, []byte, bool, error) {
	var asOf time.Time
	var body string
	err := c.db.QueryRowContext(ctx, `SELECT as_of, summaries FROM machine_feed WHERE id = 1`).Scan(nullTimeScanner{&asOf}, &body)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return time.Time{}, nil, false, nil
	case err != nil:
		return time.Time{}, nil, false, c.fail("read the machine workflows' feed", err)
	}
	return asOf, []byte(body), true, nil
}

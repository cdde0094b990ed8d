package sqlcat

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
)

const rejectionColumns = `module, "commit", digest, rejected_by, reason, rejected_at`

func scanRejection(row interface{ Scan(...any) error }) (catalogue.Rejection, error) {
	var r catalogue.Rejection
	err := row.Scan(&r.Module, &r.Commit, &r.Digest, &r.By, &r.Reason, timeScanner{&r.At})
	return r, err
}

// Reject implements catalogue.Catalogue: find the build, insert its
// rejection unless one is there (ON CONFLICT DO NOTHING: a concurrent
// rejecter waits for the first, then inserts nothing), and answer with the
// row stored, whichever call wrote it.
func (c *Catalogue) Reject(ctx context.Context, module, commit, by, reason string) (catalogue.Rejection, error) {
	op := fmt.Sprintf("reject build of %s at %s", module, commit)
	if err := catalogue.ValidReason(reason); err != nil {
		return catalogue.Rejection{}, fmt.Errorf("%s: %w", op, err)
	}
	var digest string
	err := c.db.QueryRowContext(ctx, `SELECT digest FROM builds WHERE module = $1 AND "commit" = $2`, module, commit).Scan(&digest)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return catalogue.Rejection{}, fmt.Errorf("%s: %w", op, catalogue.ErrUnknownBuild)
	case err != nil:
		return catalogue.Rejection{}, c.fail(op, err)
	}
	if _, err := c.db.ExecContext(ctx,
		`INSERT INTO rejections (`+rejectionColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (module, "commit") DO NOTHING`,
		module, commit, digest, by, reason, c.d.timeArg(c.stamp())); err != nil {
		return catalogue.Rejection{}, c.fail(op, err)
	}
	r, err := scanRejection(c.db.QueryRowContext(ctx,
		`SELECT `+rejectionColumns+` FROM rejections WHERE module = $1 AND "commit" = $2`, module, commit))
	if err != nil {
		return catalogue.Rejection{}, c.fail(op, err)
	}
	return r, nil
}

// Rejected implements catalogue.Catalogue, from the rejections_digest index;
// equal times are ordered by module and commit so that every worker names
// the same rejection.
func (c *Catalogue) Rejected(ctx context.Context, digest string) (catalogue.Rejection, bool, error) {
	r, err := scanRejection(c.db.QueryRowContext(ctx,
		`SELECT `+rejectionColumns+` FROM rejections WHERE digest = $1 ORDER BY rejected_at, module, "commit" LIMIT 1`, digest))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return catalogue.Rejection{}, false, nil
	case err != nil:
		return catalogue.Rejection{}, false, c.fail("is "+digest+" rejected", err)
	}
	return r, true, nil
}

const freezeColumns = `id, module, machine, frozen_by, reason, frozen_at, lifted_by, lifted_at`

func scanFreeze(row interface{ Scan(...any) error }) (catalogue.Freeze, error) {
	var f catalogue.Freeze
	var lifted time.Time
	err := row.Scan(&f.ID, &f.Module, &f.Machine, &f.By, &f.Reason, timeScanner{&f.At}, &f.LiftedBy, nullTimeScanner{&lifted})
	if err == nil && !lifted.IsZero() {
		f.LiftedAt = &lifted
	}
	return f, err
}

// Freeze implements catalogue.Catalogue: one row per freeze, its ID from the
// database (RETURNING reads it back in both dialects).
func (c *Catalogue) Freeze(ctx context.Context, module, machine, by, reason string) (catalogue.Freeze, error) {
	op := "freeze " + catalogue.Freeze{Module: module, Machine: machine}.Scope()
	if err := catalogue.ValidFreezeReason(reason); err != nil {
		return catalogue.Freeze{}, fmt.Errorf("%s: %w", op, err)
	}
	f, err := scanFreeze(c.db.QueryRowContext(ctx,
		`INSERT INTO freezes (module, machine, frozen_by, reason, frozen_at) VALUES ($1, $2, $3, $4, $5)
		RETURNING `+freezeColumns,
		module, machine, by, reason, c.d.timeArg(c.stamp())))
	if err != nil {
		return catalogue.Freeze{}, c.fail(op, err)
	}
	return f, nil
}

// Unfreeze implements catalogue.Catalogue: one UPDATE marks the scope's
// active freezes lifted and returns them, so that two operators lifting at
// once each get only the freezes they lifted.
func (c *Catalogue) Unfreeze(ctx context.Context, module, machine, by string) ([]catalogue.Freeze, error) {
	op := "unfreeze " + catalogue.Freeze{Module: module, Machine: machine}.Scope()
	rows, err := c.db.QueryContext(ctx,
		`UPDATE freezes SET lifted_by = $1, lifted_at = $2
		WHERE module = $3 AND machine = $4 AND lifted_at IS NULL
		RETURNING `+freezeColumns,
		by, c.d.timeArg(c.stamp()), module, machine)
	if err != nil {
		return nil, c.fail(op, err)
	}
	out, err := scanFreezes(rows)
	if err != nil {
		return nil, c.fail(op, err)
	}
	slices.SortFunc(out, func(a, b catalogue.Freeze) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Freezes implements catalogue.Catalogue, from the freezes_active index.
func (c *Catalogue) Freezes(ctx context.Context) ([]catalogue.Freeze, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT `+freezeColumns+` FROM freezes WHERE lifted_at IS NULL ORDER BY id`)
	if err != nil {
		return nil, c.fail("list freezes", err)
	}
	out, err := scanFreezes(rows)
	if err != nil {
		return nil, c.fail("list freezes", err)
	}
	return out, nil
}

func scanFreezes(rows *sql.Rows) ([]catalogue.Freeze, error) {
	defer rows.Close()
	var out []catalogue.Freeze
	for rows.Next() {
		f, err := scanFreeze(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

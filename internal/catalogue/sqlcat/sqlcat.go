// Package sqlcat is the catalogue kept in a SQL database: SQLite for one
// worker (or a few on one machine) that should not lose its builds on a
// restart, PostgreSQL for a fleet of workers sharing one catalogue. It is one
// implementation over database/sql, because the contract is small and the
// queries are the same in both; only the schema's types, the time encoding
// and the migration lock differ (see dialect).
//
// Sharing is the point of it, so it leans on the database for the cases
// catalogue.Catalogue promises: two workers recording one build at once
// insert with ON CONFLICT (module, commit) DO NOTHING and then both compare
// the stored digest with their own, so neither loses the build, neither
// records it twice, and a non-reproducible build is refused whichever worker
// came second. Two operators (or a retried activity) rejecting one build at
// once do the same with rejections: insert with ON CONFLICT (module, commit)
// DO NOTHING, then both read the one row that won, so both answer with the
// first rejection. Builds and rejections are never updated or deleted, which
// is what makes a check after an insert (rather than a transaction) enough.
//
// The schema migrates itself at Open from migrations embedded in the binary.
package sqlcat

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	// The drivers: PostgreSQL through pgx's database/sql adapter, SQLite
	// through a pure-Go build, so that the worker needs no cgo.
	_ "github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/meshroll/meshroll/internal/backoff"
	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/mesh"
)

// Catalogue is a catalogue.Catalogue in a SQL database. It is safe for
// concurrent use, and any number of Catalogues, in any number of processes,
// may share one database.
type Catalogue struct {
	db  *sql.DB
	d   dialect
	t   target
	now func() time.Time
}

var _ catalogue.Catalogue = (*Catalogue)(nil)

// postgresMaxConns bounds one worker's pool: catalogue calls are short, and
// a fleet of workers must stay under PostgreSQL's default max_connections
// (100).
const postgresMaxConns = 8

// Open connects to the catalogue named by dsn and brings its schema up to
// date, so that a worker that starts finds the tables it expects or fails at
// once rather than at its first build. dsn is one of
//
//	sqlite:<path>                    a file, created with its directory if missing
//	postgres://user:password@host:port/database?sslmode=...
//	postgresql://...                 the same
//
// A PostgreSQL DSN takes any parameter pgx does (sslmode, search_path, ...).
// Errors name the DSN with its password redacted.
func Open(ctx context.Context, dsn string) (*Catalogue, error) {
	t, err := parseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("open catalogue: %w", err)
	}
	c := &Catalogue{d: t.dialect, t: t, now: time.Now}
	if t.path != "" {
		if err := os.MkdirAll(filepath.Dir(t.path), 0o755); err != nil {
			return nil, c.fail("open catalogue "+t.shown, err)
		}
	}
	db, err := sql.Open(t.dialect.driver, t.driver)
	if err != nil {
		return nil, c.fail("open catalogue "+t.shown, err)
	}
	c.db = db
	if t.dialect.name == postgresDialect.name {
		db.SetMaxOpenConns(postgresMaxConns)
		db.SetMaxIdleConns(postgresMaxConns)
		db.SetConnMaxIdleTime(5 * time.Minute)
	}
	if err := ping(ctx, db); err != nil {
		db.Close()
		return nil, c.fail("open catalogue "+t.shown, err)
	}
	if err := c.migrate(ctx); err != nil {
		db.Close()
		return nil, c.fail("open catalogue "+t.shown+": migrate", err)
	}
	return c, nil
}

// openBusyFor bounds how long Open retries a connection that SQLite refuses
// with SQLITE_BUSY: as long as the busy timeout every statement waits.
const openBusyFor = 10 * time.Second

// ping makes the pool's first connection, retrying while SQLite answers
// SQLITE_BUSY. Workers that start at once on a new file all switch it to
// write-ahead logging as they connect, and SQLite refuses all but one of
// those switches at once, without calling the busy handler (waiting there
// could deadlock); the losers find the file in WAL mode when they retry.
func ping(ctx context.Context, db *sql.DB) error {
	b := backoff.New(10*time.Millisecond, 500*time.Millisecond)
	deadline := time.Now().Add(openBusyFor)
	for {
		err := db.PingContext(ctx)
		if !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		if werr := b.Wait(ctx); werr != nil {
			return err
		}
	}
}

// isBusy is whether err is SQLite's SQLITE_BUSY (any extended code of it).
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// Close closes the connection pool; calls after it fail.
func (c *Catalogue) Close() error {
	if err := c.db.Close(); err != nil {
		return c.fail("close catalogue "+c.t.shown, err)
	}
	return nil
}

// String names the catalogue by its DSN, password redacted, so that a worker
// can log which catalogue it uses.
func (c *Catalogue) String() string { return c.t.shown }

// fail wraps err with the operation and scrubs the DSN's secrets from the
// message: drivers quote connection details back in some errors.
func (c *Catalogue) fail(op string, err error) error {
	return scrub(fmt.Errorf("%s: %w", op, err), c.t.original, c.t.secrets)
}

const buildColumns = `module, "commit", generation, digest, image`

func scanBuild(row interface{ Scan(...any) error }) (mesh.Build, error) {
	var b mesh.Build
	err := row.Scan(&b.Module, &b.Commit, &b.Generation, &b.Digest, &b.Image)
	return b, err
}

// stamp is a time as the catalogue stores it: UTC, to the microsecond
// (PostgreSQL's precision, used for SQLite too so both read back alike).
func (c *Catalogue) stamp() time.Time { return c.now().UTC().Truncate(time.Microsecond) }

// Record implements catalogue.Catalogue: insert unless the module and commit
// are known, then compare the stored digest, so that a concurrent recorder of
// the same build is a no-op and one of another digest an error.
func (c *Catalogue) Record(ctx context.Context, b mesh.Build, plan string) error {
	if err := mesh.ValidDigest(b.Digest); err != nil {
		return fmt.Errorf("record build of %s: %w", b.Module, err)
	}
	op := fmt.Sprintf("record build of %s at %s", b.Module, b.Commit)
	res, err := c.db.ExecContext(ctx,
		`INSERT INTO builds (module, "commit", generation, digest, image, plan, built_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (module, "commit") DO NOTHING`,
		b.Module, b.Commit, b.Generation, b.Digest, b.Image, plan, c.d.timeArg(c.stamp()))
	if err != nil {
		return c.fail(op, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	var stored string
	err = c.db.QueryRowContext(ctx, `SELECT digest FROM builds WHERE module = $1 AND "commit" = $2`, b.Module, b.Commit).Scan(&stored)
	if err != nil {
		return c.fail(op, err)
	}
	if stored != b.Digest {
		return fmt.Errorf("%s: already recorded with digest %s, now %s: %w", op, stored, b.Digest, catalogue.ErrNotReproducible)
	}
	return nil
}

// Lookup implements catalogue.Catalogue.
func (c *Catalogue) Lookup(ctx context.Context, digest string) (mesh.Build, bool, error) {
	return c.one(ctx, "look up "+digest,
		`SELECT `+buildColumns+` FROM builds WHERE digest = $1 ORDER BY generation DESC, id LIMIT 1`, digest)
}

// Build implements catalogue.Catalogue: the exact commit first, then, for a
// hex prefix, the module's commits it begins (compared with substr, which
// both databases read alike, unlike LIKE's case rules). Only enough
// candidates to name in the error are read.
func (c *Catalogue) Build(ctx context.Context, module, commit string) (mesh.Build, bool, error) {
	op := fmt.Sprintf("find build of %s at %s", module, commit)
	b, ok, err := c.one(ctx, op,
		`SELECT `+buildColumns+` FROM builds WHERE module = $1 AND "commit" = $2`, module, commit)
	if err != nil || ok {
		return b, ok, err
	}
	prefix, ok, err := catalogue.CommitPrefix(commit)
	if err != nil {
		return mesh.Build{}, false, fmt.Errorf("%s: %w", op, err)
	}
	if !ok {
		return mesh.Build{}, false, nil
	}
	rows, err := c.db.QueryContext(ctx,
		`SELECT `+buildColumns+` FROM builds WHERE module = $1 AND substr("commit", 1, $2) = $3
		ORDER BY generation DESC, id LIMIT $4`,
		module, int64(len(prefix)), prefix, int64(maxCandidates))
	if err != nil {
		return mesh.Build{}, false, c.fail(op, err)
	}
	defer rows.Close()
	var found []mesh.Build
	for rows.Next() {
		b, err := scanBuild(rows)
		if err != nil {
			return mesh.Build{}, false, c.fail(op, err)
		}
		found = append(found, b)
	}
	if err := rows.Err(); err != nil {
		return mesh.Build{}, false, c.fail(op, err)
	}
	switch len(found) {
	case 0:
		return mesh.Build{}, false, nil
	case 1:
		return found[0], true, nil
	}
	return mesh.Build{}, false, catalogue.AmbiguousCommit(module, commit, found)
}

// maxCandidates bounds the builds an ambiguous commit prefix names: enough
// to see which digit to add.
const maxCandidates = 10

// Newest implements catalogue.Catalogue.
func (c *Catalogue) Newest(ctx context.Context, module string) (mesh.Build, bool, error) {
	return c.newest(ctx, "newest build of "+module, "", module)
}

// NewestConverged implements catalogue.Catalogue. Convergence is kept per
// digest, since the digest is what a machine runs: every commit that built it
// converged. Rejection is judged per digest too, so a commit whose bits
// another commit's rejection covers is skipped as well.
func (c *Catalogue) NewestConverged(ctx context.Context, module string) (mesh.Build, bool, error) {
	return c.newest(ctx, "newest converged build of "+module, convergedSomewhere+notRejected, module)
}

// NewestHealthyBelow implements catalogue.Catalogue, as NewestConverged does
// below generation.
func (c *Catalogue) NewestHealthyBelow(ctx context.Context, module string, generation int64) (mesh.Build, bool, error) {
	return c.newest(ctx, fmt.Sprintf("newest healthy build of %s below generation %d", module, generation),
		`AND generation < $2 `+convergedSomewhere+notRejected, module, generation)
}

// Filters for newest: the build's digest ran somewhere; no build with the
// build's digest is rejected. Each probes one index per build it looks at.
const (
	convergedSomewhere = `AND EXISTS (SELECT 1 FROM converged WHERE converged.digest = builds.digest) `
	notRejected        = `AND NOT EXISTS (SELECT 1 FROM rejections WHERE rejections.digest = builds.digest) `
)

// NewestConvergedOn implements catalogue.Catalogue. Like NewestConverged it
// goes by digest, so every commit that built what ran on the machine counts,
// and the highest generation among them is the answer.
//
// It needs no index of its own: it walks builds_module_generation backwards
// and probes the (digest, machine) unique index for each build, stopping at
// the first that converged on the machine, so a push to a machine that runs
// a recent build reads a few rows. A machine the module never converged on
// reads all the module's builds, one index probe each. An index led by
// machine would not change that, only the constant, and it offers the
// planner a plan over the machine's whole convergence history (SQLite took
// it for this query written as a join, making the common case the slow one).
//
// Like NewestConverged it skips rejected builds (see catalogue.Catalogue).
func (c *Catalogue) NewestConvergedOn(ctx context.Context, module, machine string) (mesh.Build, bool, error) {
	return c.newest(ctx, fmt.Sprintf("newest build of %s converged on %s", module, machine),
		`AND EXISTS (SELECT 1 FROM converged WHERE converged.digest = builds.digest AND converged.machine = $2) `+notRejected,
		module, machine)
}

// newest returns the module's highest-generation build that also meets
// filter (SQL after the module's condition; $1 is the module, the rest of
// args follow), the earliest recorded among equals.
func (c *Catalogue) newest(ctx context.Context, op, filter, module string, args ...any) (mesh.Build, bool, error) {
	return c.one(ctx, op,
		`SELECT `+buildColumns+` FROM builds WHERE module = $1 `+filter+` ORDER BY generation DESC, id LIMIT 1`,
		append([]any{module}, args...)...)
}

func (c *Catalogue) one(ctx context.Context, op, query string, args ...any) (mesh.Build, bool, error) {
	b, err := scanBuild(c.db.QueryRowContext(ctx, query, args...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return mesh.Build{}, false, nil
	case err != nil:
		return mesh.Build{}, false, c.fail(op, err)
	}
	return b, true, nil
}

// MarkConverged implements catalogue.Catalogue. Marking again is a no-op
// (ON CONFLICT DO NOTHING), so a host's repeated reports list a machine once.
func (c *Catalogue) MarkConverged(ctx context.Context, digest, machine string) error {
	op := fmt.Sprintf("mark %s converged on %s", digest, machine)
	var known bool
	if err := c.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM builds WHERE digest = $1)`, digest).Scan(&known); err != nil {
		return c.fail(op, err)
	}
	if !known {
		return fmt.Errorf("%s: digest not in the catalogue", op)
	}
	if _, err := c.db.ExecContext(ctx,
		`INSERT INTO converged (digest, machine, at) VALUES ($1, $2, $3) ON CONFLICT (digest, machine) DO NOTHING`,
		digest, machine, c.d.timeArg(c.stamp())); err != nil {
		return c.fail(op, err)
	}
	return nil
}

// Builds implements catalogue.Catalogue, in one query so that the list, its
// machines and its rejections come from one snapshot.
func (c *Catalogue) Builds(ctx context.Context, module string, limit int) ([]catalogue.Entry, error) {
	op := "list builds of " + module
	args := []any{module}
	limitClause := ""
	if limit > 0 {
		limitClause = "LIMIT $2"
		args = append(args, int64(limit))
	}
	// r is each digest's earliest rejection, ordered as Rejected orders
	// them. It numbers every rejection, which stays cheap because
	// rejections are operators' acts, a handful per module.
	rows, err := c.db.QueryContext(ctx, `
		SELECT b.module, b."commit", b.generation, b.digest, b.image, b.plan, b.built_at, cv.machine,
			r.module, r."commit", r.rejected_by, r.reason, r.rejected_at
		FROM (
			SELECT id, module, "commit", generation, digest, image, plan, built_at
			FROM builds WHERE module = $1 ORDER BY generation DESC, id `+limitClause+`
		) b
		LEFT JOIN converged cv ON cv.digest = b.digest
		LEFT JOIN (
			SELECT module, "commit", digest, rejected_by, reason, rejected_at,
				row_number() OVER (PARTITION BY digest ORDER BY rejected_at, module, "commit") AS n
			FROM rejections
		) r ON r.digest = b.digest AND r.n = 1
		ORDER BY b.generation DESC, b.id, cv.at, cv.machine`, args...)
	if err != nil {
		return nil, c.fail(op, err)
	}
	defer rows.Close()
	var out []catalogue.Entry
	for rows.Next() {
		var e catalogue.Entry
		var machine, rModule, rCommit, rBy, rReason sql.NullString
		var r catalogue.Rejection
		if err := rows.Scan(&e.Build.Module, &e.Build.Commit, &e.Build.Generation, &e.Build.Digest, &e.Build.Image,
			&e.Plan, timeScanner{&e.BuiltAt}, &machine,
			&rModule, &rCommit, &rBy, &rReason, nullTimeScanner{&r.At}); err != nil {
			return nil, c.fail(op, err)
		}
		if n := len(out); n > 0 && out[n-1].Build == e.Build {
			out[n-1].Converged = append(out[n-1].Converged, machine.String)
			continue
		}
		if machine.Valid {
			e.Converged = []string{machine.String}
		}
		if rModule.Valid {
			r.Module, r.Commit, r.Digest, r.By, r.Reason = rModule.String, rCommit.String, e.Build.Digest, rBy.String, rReason.String
			e.Rejected = &r
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, c.fail(op, err)
	}
	return out, nil
}

// timeScanner reads a stored time: PostgreSQL's driver gives a time.Time,
// SQLite gives the text sqliteDialect.timeArg wrote.
type timeScanner struct{ t *time.Time }

func (s timeScanner) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		*s.t = v.UTC()
		return nil
	case []byte:
		return s.parse(string(v))
	case string:
		return s.parse(v)
	}
	return fmt.Errorf("stored time is a %T, want a time or text", src)
}

// nullTimeScanner reads a stored time that may be NULL (from an outer
// join), leaving the zero time for NULL.
type nullTimeScanner struct{ t *time.Time }

func (s nullTimeScanner) Scan(src any) error {
	if src == nil {
		*s.t = time.Time{}
		return nil
	}
	return timeScanner(s).Scan(src)
}

func (s timeScanner) parse(text string) error {
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(text))
	if err != nil {
		return fmt.Errorf("stored time %q: %w", text, err)
	}
	*s.t = t.UTC()
	return nil
}

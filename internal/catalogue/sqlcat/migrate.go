package sqlcat

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
)

// Migrations live in migrations/ as NNNN_name.sql when one text serves both
// databases, or as NNNN_name.sqlite.sql plus NNNN_name.postgres.sql when they
// differ. They are embedded so that a worker binary carries the schema it
// expects, and applied in version order, each once, recorded in
// schema_migrations. Never edit an applied migration: add the next number.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

const migrationDir = "migrations"

// dialectNames are the suffixes a per-dialect migration may carry; a version
// given per dialect must be given for all of them.
var dialectNames = []string{sqliteDialect.name, postgresDialect.name}

var migrationFileRE = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)(?:\.([a-z]+))?\.sql$`)

type migration struct {
	version int
	name    string
	file    string
	sql     string
}

// loadMigrations returns the migrations for dialect, in version order, after
// checking the whole directory: every file named by the pattern, versions
// 1..N without gaps, one name per version, and a version either common or
// given for every dialect. The checks run for every dialect at once so that a
// migration written for one database only fails every test, not just the
// other database's.
func loadMigrations(fsys fs.FS, dialect string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, migrationDir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	type version struct {
		name   string
		common string            // file
		per    map[string]string // dialect -> file
	}
	versions := map[int]*version{}
	for _, e := range entries {
		m := migrationFileRE.FindStringSubmatch(e.Name())
		if e.IsDir() || m == nil {
			return nil, fmt.Errorf("migration %s: want NNNN_name.sql or NNNN_name.<dialect>.sql", e.Name())
		}
		n, _ := strconv.Atoi(m[1])
		name, d := m[2], m[3]
		if d != "" && !slices.Contains(dialectNames, d) {
			return nil, fmt.Errorf("migration %s: unknown dialect %q (want one of %v)", e.Name(), d, dialectNames)
		}
		v := versions[n]
		if v == nil {
			v = &version{name: name, per: map[string]string{}}
			versions[n] = v
		}
		if v.name != name {
			return nil, fmt.Errorf("migration %04d has two names, %s and %s", n, v.name, name)
		}
		if d == "" {
			v.common = e.Name()
		} else {
			v.per[d] = e.Name()
		}
	}
	var out []migration
	for n := 1; n <= len(versions); n++ {
		v := versions[n]
		if v == nil {
			return nil, fmt.Errorf("migrations skip version %04d (have %d versions)", n, len(versions))
		}
		if v.common != "" && len(v.per) > 0 {
			return nil, fmt.Errorf("migration %04d is both common (%s) and per dialect", n, v.common)
		}
		file := v.common
		if file == "" {
			for _, d := range dialectNames {
				if v.per[d] == "" {
					return nil, fmt.Errorf("migration %04d_%s has no %s variant", n, v.name, d)
				}
			}
			file = v.per[dialect]
		}
		text, err := fs.ReadFile(fsys, path.Join(migrationDir, file))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", file, err)
		}
		out = append(out, migration{version: n, name: v.name, file: file, sql: string(text)})
	}
	if !slices.Contains(dialectNames, dialect) {
		return nil, fmt.Errorf("no migrations for dialect %q", dialect)
	}
	return out, nil
}

// errSchemaNewer is returned (wrapped) when the database was migrated by a
// newer meshroll: this one does not know what the newer migrations changed,
// so it refuses rather than misread the tables.
var errSchemaNewer = errors.New("the catalogue's schema is newer than this meshroll")

// migrate brings the schema up to date in one transaction: either every
// pending migration applies or none does. Two processes opening one database
// at once serialise on PostgreSQL's transaction-scoped advisory lock (on
// SQLite, on the write lock BEGIN IMMEDIATE takes); the second then finds the
// migrations recorded and applies nothing.
func (c *Catalogue) migrate(ctx context.Context) (err error) {
	ms, err := loadMigrations(migrationFiles, c.d.name)
	if err != nil {
		return err
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if c.d.lockMigrations != "" {
		if _, err := tx.ExecContext(ctx, c.d.lockMigrations); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, c.d.createMigrations); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	applied, err := appliedMigrations(ctx, tx)
	if err != nil {
		return err
	}
	for _, v := range slices.Sorted(maps.Keys(applied)) {
		name := applied[v]
		switch {
		case v > len(ms):
			return fmt.Errorf("%w: it has migration %04d_%s, this one knows %d (upgrade meshroll)", errSchemaNewer, v, name, len(ms))
		case v < 1:
			return fmt.Errorf("schema_migrations holds version %d", v)
		case name != ms[v-1].name:
			return fmt.Errorf("migration %04d was applied as %q, but this meshroll calls it %q", v, name, ms[v-1].name)
		}
	}
	at := c.d.timeArg(c.now())
	for _, m := range ms {
		if _, ok := applied[m.version]; ok {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.file, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
			m.version, m.name, at); err != nil {
			return fmt.Errorf("record migration %s: %w", m.file, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}

func appliedMigrations(ctx context.Context, tx *sql.Tx) (map[int]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version, name FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	applied := map[int]string{}
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
		applied[v] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	return applied, nil
}

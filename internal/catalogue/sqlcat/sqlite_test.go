package sqlcat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/catalogue/catalogtest"
)

// openT opens dsn and closes it when the test ends.
func openT(t *testing.T, dsn string) *Catalogue {
	t.Helper()
	c, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open(%s): %v", RedactDSN(dsn), err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func sqliteDSN(t *testing.T) string {
	return "sqlite:" + filepath.Join(t.TempDir(), "state", "catalogue.db")
}

func TestSQLiteConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalogue.Catalogue { return openT(t, sqliteDSN(t)) })
}

func TestSQLiteSharedConformance(t *testing.T) {
	catalogtest.RunShared(t, func(t *testing.T) (catalogue.Catalogue, catalogue.Catalogue) {
		dsn := sqliteDSN(t)
		return openT(t, dsn), openT(t, dsn)
	})
}

func TestSQLiteSettings(t *testing.T) {
	c := openT(t, sqliteDSN(t))
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000"} {
		var got string
		if err := c.db.QueryRowContext(t.Context(), "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

func TestSQLiteReopenKeepsData(t *testing.T) {
	testReopenKeepsData(t, sqliteDSN(t))
}

// testReopenKeepsData is a worker restarting: what it recorded is there, and
// the migrations are not applied a second time.
func testReopenKeepsData(t *testing.T, dsn string) {
	ctx := t.Context()
	b1, b2 := catalogtest.Build("host", 1), catalogtest.Build("host", 2)
	c, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct {
		gen  int64
		plan string
	}{{1, "plan/one"}, {2, "plan/two"}} {
		if err := c.Record(ctx, catalogtest.Build("host", b.gen), b.plan); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkConverged(ctx, b1.Digest, "edge-1"); err != nil {
		t.Fatal(err)
	}
	rejection, err := c.Reject(ctx, "host", b2.Commit, "alice", "crashes on start")
	if err != nil {
		t.Fatal(err)
	}
	before, err := c.Builds(ctx, "host", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c2 := openT(t, dsn)
	after, err := c2.Builds(ctx, "host", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := jsonOf(t, after), jsonOf(t, before); a != b {
		t.Errorf("Builds after reopen = %s, want %s", a, b)
	}
	if got, ok, err := c2.Rejected(ctx, b2.Digest); err != nil || !ok || got.Reason != rejection.Reason || !got.At.Equal(rejection.At) {
		t.Errorf("Rejected after reopen = %+v, %v, %v; want %+v", got, ok, err, rejection)
	}
	if got, ok, err := c2.NewestConverged(ctx, "host"); err != nil || !ok || got != b1 {
		t.Errorf("NewestConverged after reopen = %+v, %v, %v; want %+v", got, ok, err, b1)
	}
	if got, ok, err := c2.Newest(ctx, "host"); err != nil || !ok || got != b2 {
		t.Errorf("Newest after reopen = %+v, %v, %v; want %+v", got, ok, err, b2)
	}
	checkMigrations(t, c2)
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// checkMigrations fails unless each known migration is recorded exactly once.
func checkMigrations(t *testing.T, c *Catalogue) {
	t.Helper()
	ms, err := loadMigrations(migrationFiles, c.d.name)
	if err != nil {
		t.Fatal(err)
	}
	var rows, versions int
	if err := c.db.QueryRowContext(t.Context(),
		`SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || versions != len(ms) {
		t.Errorf("schema_migrations has %d rows of %d versions, want %d", rows, versions, len(ms))
	}
}

func TestSQLiteConcurrentOpen(t *testing.T) {
	testConcurrentOpen(t, sqliteDSN(t))
}

// testConcurrentOpen is several workers starting at once on a new database:
// all of them open it, and the migrations apply once.
func testConcurrentOpen(t *testing.T, dsn string) {
	const n = 6
	cs := make([]*Catalogue, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			cs[i], errs[i] = Open(t.Context(), dsn)
		})
	}
	close(start)
	wg.Wait()
	for i, c := range cs {
		if errs[i] != nil {
			t.Errorf("Open %d: %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { c.Close() })
	}
	if t.Failed() {
		t.FailNow()
	}
	checkMigrations(t, cs[0])
	for i, c := range cs {
		if err := c.Record(t.Context(), catalogtest.Build("host", int64(i+1)), "plan/test"); err != nil {
			t.Fatalf("Record via catalogue %d: %v", i, err)
		}
	}
	if es, err := cs[n-1].Builds(t.Context(), "host", 0); err != nil || len(es) != n {
		t.Fatalf("Builds = %d entries, %v; want %d", len(es), err, n)
	}
}

func TestSQLiteTwoRecorders(t *testing.T) {
	dsn := sqliteDSN(t)
	testTwoRecorders(t, openT(t, dsn), openT(t, dsn))
}

// testTwoRecorders is two workers (two pools) recording the same builds, in
// the same order, from many goroutines at once: the worst case for a
// check-then-insert race. Exactly one row per module and commit may result,
// and no recorder may see an error.
func testTwoRecorders(t *testing.T, a, b *Catalogue) {
	const goroutines, count = 12, 20
	catalogtest.Parallel(t, []catalogue.Catalogue{a, b}, goroutines, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		for gen := int64(1); gen <= count; gen++ {
			if err := c.Record(ctx, catalogtest.Build("host", gen), fmt.Sprintf("plan/%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	rows, keys := rowsAndKeys(t, a, "builds")
	if rows != count || keys != count {
		t.Errorf("builds has %d rows for %d module/commit pairs; want %d and %d", rows, keys, count, count)
	}
}

// rowsAndKeys counts table's rows and its distinct module/commit pairs.
func rowsAndKeys(t *testing.T, c *Catalogue, table string) (rows, keys int) {
	t.Helper()
	if err := c.db.QueryRowContext(t.Context(),
		`SELECT count(*), count(DISTINCT module || '/' || "commit") FROM `+table).Scan(&rows, &keys); err != nil {
		t.Fatal(err)
	}
	return rows, keys
}

func TestSQLiteTwoRejecters(t *testing.T) {
	dsn := sqliteDSN(t)
	testTwoRejecters(t, openT(t, dsn), openT(t, dsn))
}

// testTwoRejecters is two workers (two pools) rejecting the same builds, in
// the same order, from many goroutines at once, each with its own words:
// one row per build, and every caller answered with that row.
func testTwoRejecters(t *testing.T, a, b *Catalogue) {
	const goroutines, count = 12, 5
	for gen := int64(1); gen <= count; gen++ {
		if err := a.Record(t.Context(), catalogtest.Build("host", gen), "plan/test"); err != nil {
			t.Fatal(err)
		}
	}
	answers := make([][count]catalogue.Rejection, goroutines)
	catalogtest.Parallel(t, []catalogue.Catalogue{a, b}, goroutines, func(ctx context.Context, i int, c catalogue.Catalogue) error {
		for k := range count {
			r, err := c.Reject(ctx, "host", catalogtest.Build("host", int64(k+1)).Commit,
				fmt.Sprintf("op-%d", i), fmt.Sprintf("reason %d", i))
			if err != nil {
				return err
			}
			answers[i][k] = r
		}
		return nil
	})
	for k := range count {
		first := answers[0][k]
		for i := range goroutines {
			if r := answers[i][k]; r.By != first.By || r.Reason != first.Reason || !r.At.Equal(first.At) {
				t.Errorf("build %d: goroutine %d was answered %+v, goroutine 0 %+v", k+1, i, r, first)
			}
		}
	}
	rows, keys := rowsAndKeys(t, a, "rejections")
	if rows != count || keys != count {
		t.Errorf("rejections has %d rows for %d builds; want %d and %d", rows, keys, count, count)
	}
}

func TestSQLiteUpgradeFromInit(t *testing.T) {
	testUpgradeFromInit(t, sqliteDSN(t))
}

// testUpgradeFromInit is a catalogue written before rejections existed (only
// 0001 applied, builds in it) opened by this meshroll: 0002 applies at Open,
// the builds are kept, and they can be rejected. The old schema is made by
// undoing 0002 and what came after, each of which adds tables and nothing
// else.
func testUpgradeFromInit(t *testing.T, dsn string) {
	ctx := t.Context()
	c, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := catalogtest.Build("host", 1)
	if err := c.Record(ctx, b, "plan/old"); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkConverged(ctx, b.Digest, "edge-1"); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`DROP TABLE machine_feed`, `DROP TABLE host_reports`, `DROP TABLE freezes`, `DROP TABLE rejections`, `DELETE FROM schema_migrations WHERE version >= 2`} {
		if _, err := c.db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c2 := openT(t, dsn)
	checkMigrations(t, c2)
	if got, ok, err := c2.NewestConverged(ctx, "host"); err != nil || !ok || got != b {
		t.Fatalf("NewestConverged after upgrade = %+v, %v, %v; want %+v", got, ok, err, b)
	}
	if _, err := c2.Reject(ctx, "host", b.Commit, "alice", "crashes on start"); err != nil {
		t.Fatalf("Reject after upgrade: %v", err)
	}
	if _, ok, err := c2.NewestConverged(ctx, "host"); err != nil || ok {
		t.Fatalf("NewestConverged after rejecting the only build: found %v, %v", ok, err)
	}
}

func TestSQLiteRejectionsReferenceBuilds(t *testing.T) {
	testRejectionsReferenceBuilds(t, openT(t, sqliteDSN(t)))
}

// testRejectionsReferenceBuilds: the schema itself refuses a rejection of a
// build it does not hold, or without a reason, whatever code writes it.
func testRejectionsReferenceBuilds(t *testing.T, c *Catalogue) {
	b := catalogtest.Build("host", 1)
	if err := c.Record(t.Context(), b, "plan/test"); err != nil {
		t.Fatal(err)
	}
	at := c.d.timeArg(c.stamp())
	for name, args := range map[string][]any{
		"unknown build": {"host", catalogtest.Build("host", 2).Commit, b.Digest, "alice", "bad", at},
		"empty reason":  {"host", b.Commit, b.Digest, "alice", "", at},
	} {
		if _, err := c.db.ExecContext(t.Context(),
			`INSERT INTO rejections (`+rejectionColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`, args...); err == nil {
			t.Errorf("%s: the insert succeeded", name)
		}
	}
}

func TestOpenRejectsBadDSN(t *testing.T) {
	for _, dsn := range []string{
		"",
		"catalogue.db",
		"sqlite:",
		"sqlite::memory:",
		"sqlite:file:x.db?mode=memory",
		"mysql://u:pw@localhost/db",
		"host=localhost password=hunter2pw",
	} {
		c, err := Open(t.Context(), dsn)
		if err == nil {
			c.Close()
			t.Errorf("Open(%q) succeeded", dsn)
			continue
		}
		if !strings.HasPrefix(err.Error(), "open catalogue") {
			t.Errorf("Open(%q) error %q does not name the operation", dsn, err)
		}
		if strings.Contains(err.Error(), "hunter2pw") || strings.Contains(err.Error(), ":pw@") {
			t.Errorf("Open(%q) error %q holds the password", dsn, err)
		}
	}
}

func TestOpenCreatesStateDir(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "catalogue.db")
	c := openT(t, "sqlite:"+path)
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if c.String() != "sqlite:"+path {
		t.Errorf("String() = %q", c.String())
	}
	// A path that would read as URI parameters is still a path.
	odd := filepath.Join(t.TempDir(), "x?mode=memory#y%20", "catalogue.db")
	openT(t, "sqlite:"+odd)
	if _, err := os.Stat(odd); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	dsn := sqliteDSN(t)
	c, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.db.ExecContext(t.Context(),
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'from_the_future', '2999-01-01T00:00:00.000000Z')`); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = Open(t.Context(), dsn)
	if err == nil {
		c.Close()
		t.Fatal("Open of a database migrated by a newer meshroll succeeded")
	}
	if !errors.Is(err, errSchemaNewer) || !strings.Contains(err.Error(), "migrate") {
		t.Fatalf("error %q; want errSchemaNewer, naming the migration", err)
	}
}

func TestCallsAfterCloseFail(t *testing.T) {
	c, err := Open(t.Context(), sqliteDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	err = c.Record(context.Background(), catalogtest.Build("host", 1), "plan/test")
	if err == nil || !strings.Contains(err.Error(), "record build of host") {
		t.Fatalf("Record after Close: %v; want an error naming the operation", err)
	}
}

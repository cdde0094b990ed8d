// Package pgtest gives a test a PostgreSQL database of its own, on the
// server scripts/postgres-test.sh starts, so that tests of the SQL
// catalogue and of the stacks that use it never see each other's rows. It
// is for tests only.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	// The PostgreSQL driver, as the catalogue uses it.
	_ "github.com/jackc/pgx/v5/stdlib"
)

// Env names the DSN of a PostgreSQL the tests may create databases in (the
// role needs CREATEDB); scripts/postgres-test.sh prints one.
const Env = "MESHROLL_TEST_POSTGRES_DSN"

// Hint says how to give the tests a PostgreSQL.
const Hint = Env + " is not set: .ci/run must start PostgreSQL via scripts/postgres-test.sh " +
	"and export the DSN it prints; locally, as root: export " + Env + `="$(bash scripts/postgres-test.sh)"`

// Base returns the configured DSN. Without one the test skips, except in
// CI (CI set), where a skipped database test would pass for a tested one.
func Base(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(Env)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal(Hint)
		}
		t.Skip(Hint)
	}
	return dsn
}

// Fresh creates a database of its own for one test and returns its DSN;
// it is dropped when the test ends (after the test's catalogues close:
// cleanups run last-registered first).
func Fresh(t testing.TB) string {
	t.Helper()
	base := Base(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL", Env)
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("connect to %s: %v", u.Redacted(), err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "meshroll_test_" + hex.EncodeToString(suffix[:])
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		_ = admin.Close()
		t.Fatalf("create database %s on %s: %v", name, u.Redacted(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		_ = admin.Close()
	})
	u.Path = "/" + name
	return u.String()
}

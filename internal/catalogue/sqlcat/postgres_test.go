package sqlcat

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/catalogue/catalogtest"
)

// postgresEnv names the DSN of a PostgreSQL the tests may create databases
// in (the role needs CREATEDB); scripts/postgres-test.sh prints one.
const postgresEnv = "MESHROLL_TEST_POSTGRES_DSN"

const postgresHint = postgresEnv + " is not set: .ci/run must start PostgreSQL via scripts/postgres-test.sh " +
	"and export the DSN it prints; locally, as root: export " + postgresEnv + `="$(bash scripts/postgres-test.sh)"`

// postgresBase returns the configured DSN. Without one the PostgreSQL tests
// skip, except in CI (CI set), where a skipped database test would pass for a
// tested one.
func postgresBase(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(postgresEnv)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal(postgresHint)
		}
		t.Skip(postgresHint)
	}
	return dsn
}

// freshPostgres creates a database of its own for one test, so that runs and
// tests never see each other's rows, and drops it when the test ends (after
// the test's catalogues close: cleanups run last-registered first).
func freshPostgres(t *testing.T) string {
	t.Helper()
	base := postgresBase(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("connect to %s: %v", RedactDSN(base), err)
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	name := "meshroll_test_" + hex.EncodeToString(suffix[:])
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		admin.Close()
		t.Fatalf("create database %s on %s: %v", name, RedactDSN(base), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
		admin.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s is not a URL", postgresEnv)
	}
	u.Path = "/" + name
	return u.String()
}

func TestPostgresConformance(t *testing.T) {
	postgresBase(t)
	catalogtest.Run(t, func(t *testing.T) catalogue.Catalogue { return openT(t, freshPostgres(t)) })
}

func TestPostgresSharedConformance(t *testing.T) {
	postgresBase(t)
	catalogtest.RunShared(t, func(t *testing.T) (catalogue.Catalogue, catalogue.Catalogue) {
		dsn := freshPostgres(t)
		return openT(t, dsn), openT(t, dsn)
	})
}

func TestPostgresTwoRecorders(t *testing.T) {
	dsn := freshPostgres(t)
	testTwoRecorders(t, openT(t, dsn), openT(t, dsn))
}

func TestPostgresTwoRejecters(t *testing.T) {
	dsn := freshPostgres(t)
	testTwoRejecters(t, openT(t, dsn), openT(t, dsn))
}

func TestPostgresUpgradeFromInit(t *testing.T) {
	testUpgradeFromInit(t, freshPostgres(t))
}

func TestPostgresRejectionsReferenceBuilds(t *testing.T) {
	testRejectionsReferenceBuilds(t, openT(t, freshPostgres(t)))
}

func TestPostgresConcurrentOpen(t *testing.T) {
	testConcurrentOpen(t, freshPostgres(t))
}

func TestPostgresReopenKeepsData(t *testing.T) {
	testReopenKeepsData(t, freshPostgres(t))
}

func TestPostgresString(t *testing.T) {
	dsn := freshPostgres(t)
	c := openT(t, dsn)
	u, _ := url.Parse(dsn)
	if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(c.String(), pw) {
		t.Errorf("String() = %q holds the password", c.String())
	}
}

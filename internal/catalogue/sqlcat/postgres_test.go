package sqlcat

import (
	"net/url"
	"strings"
	"testing"

	"github.com/meshroll/meshroll/internal/catalogue"
	"github.com/meshroll/meshroll/internal/catalogue/catalogtest"
	"github.com/meshroll/meshroll/internal/catalogue/pgtest"
)

func TestPostgresConformance(t *testing.T) {
	pgtest.Base(t)
	catalogtest.Run(t, func(t *testing.T) catalogue.Catalogue { return openT(t, pgtest.Fresh(t)) })
}

func TestPostgresSharedConformance(t *testing.T) {
	pgtest.Base(t)
	catalogtest.RunShared(t, func(t *testing.T) (catalogue.Catalogue, catalogue.Catalogue) {
		dsn := pgtest.Fresh(t)
		return openT(t, dsn), openT(t, dsn)
	})
}

func TestPostgresTwoRecorders(t *testing.T) {
	dsn := pgtest.Fresh(t)
	testTwoRecorders(t, openT(t, dsn), openT(t, dsn))
}

func TestPostgresTwoRejecters(t *testing.T) {
	dsn := pgtest.Fresh(t)
	testTwoRejecters(t, openT(t, dsn), openT(t, dsn))
}

func TestPostgresUpgradeFromInit(t *testing.T) {
	testUpgradeFromInit(t, pgtest.Fresh(t))
}

func TestPostgresRejectionsReferenceBuilds(t *testing.T) {
	testRejectionsReferenceBuilds(t, openT(t, pgtest.Fresh(t)))
}

func TestPostgresConcurrentOpen(t *testing.T) {
	testConcurrentOpen(t, pgtest.Fresh(t))
}

func TestPostgresReopenKeepsData(t *testing.T) {
	testReopenKeepsData(t, pgtest.Fresh(t))
}

func TestPostgresString(t *testing.T) {
	dsn := pgtest.Fresh(t)
	c := openT(t, dsn)
	u, _ := url.Parse(dsn)
	if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(c.String(), pw) {
		t.Errorf("String() = %q holds the password", c.String())
	}
}

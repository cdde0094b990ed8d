package sqlcat

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"sqlite:/var/lib/meshroll/catalogue.db", "sqlite:/var/lib/meshroll/catalogue.db"},
		{"postgres://meshroll:s3cret@127.0.0.1:5432/db?sslmode=disable", "postgres://meshroll:xxxxx@127.0.0.1:5432/db?sslmode=disable"},
		{"postgresql://meshroll@db.internal/db", "postgresql://meshroll@db.internal/db"},
		{"postgres://db.internal/db?user=m&password=s3cret", "postgres://db.internal/db?password=xxxxx&user=m"},
		{"postgres://u:s3%2Fcret@h/db", "postgres://u:xxxxx@h/db"},
		// Too broken for url.Parse (the '/' ends the authority early): the
		// whole user information goes.
		{"postgres://u:s3/cret@h:5432/db", "postgres://xxxxx@h:5432/db"},
		{"postgres://u:12/cret@h/db", "postgres://xxxxx@h/db"},
		{"host=h password=s3cret user=u", "host=h password=xxxxx user=u"},
		{"host=h password='s3 cret' user=u", "host=h password=xxxxx user=u"},
	} {
		if got := RedactDSN(tc.in); got != tc.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestOpenErrorsHideThePassword opens PostgreSQL DSNs that fail in parsing,
// in pgx's config and in connecting: no message may hold the password.
func TestOpenErrorsHideThePassword(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String() // nothing listens here once closed
	l.Close()
	const pw = "Sup3r-s3cret"
	for _, dsn := range []string{
		"postgres://meshroll:" + pw + "@" + closed + "/db?sslmode=disable&connect_timeout=5",
		"postgresql://meshroll:" + pw + "@" + closed + "/db?sslmode=disable",
		"postgres://meshroll@" + closed + "/db?sslmode=disable&password=" + pw,
		"postgres://meshroll:" + pw + "@127.0.0.1:notaport/db",
		"postgres://meshroll:" + pw + "/x@127.0.0.1:5432/db",
		"postgres://meshroll:" + pw + "@" + closed + "/db?sslmode=bogus",
		"postgres://meshroll:" + pw + "@" + closed + "/db?connect_timeout=nope",
		"postgres://meshroll:" + strings.ReplaceAll(pw, "-", "%2D") + "@" + closed + "/db?sslmode=disable",
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		c, err := Open(ctx, dsn)
		cancel()
		if err == nil {
			c.Close()
			t.Errorf("Open(%s) succeeded", RedactDSN(dsn))
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, pw) || strings.Contains(msg, "s3cret") {
			t.Errorf("Open error holds the password: %s", msg)
		}
		if !strings.HasPrefix(msg, "open catalogue") {
			t.Errorf("Open error does not name the operation: %s", msg)
		}
		if errors.Unwrap(err) == nil {
			t.Errorf("Open error wraps nothing: %s", msg)
		}
	}
}

func TestScrubKeepsTheChain(t *testing.T) {
	base := context.DeadlineExceeded
	err := scrub(errors.Join(errors.New("dial postgres://u:pw1234@h/db"), base), "postgres://u:pw1234@h/db", secretsOf("postgres://u:pw1234@h/db"))
	if strings.Contains(err.Error(), "pw1234") || !errors.Is(err, base) {
		t.Fatalf("scrub = %q (is deadline: %v)", err, errors.Is(err, base))
	}
}

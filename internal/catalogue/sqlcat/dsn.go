package sqlcat

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// dialect is what differs between the two databases; everything else (the
// queries, with $N placeholders, which SQLite accepts too) is shared.
type dialect struct {
	name   string // migration file suffix: "sqlite" or "postgres"
	driver string // database/sql driver name
	// lockMigrations, run first in the migration transaction, serialises
	// concurrent Opens (SQLite needs none: its transactions begin IMMEDIATE).
	lockMigrations string
	// createMigrations creates schema_migrations if it is missing.
	createMigrations string
	// timeArg converts a (UTC, microsecond) time to what the driver stores.
	timeArg func(time.Time) any
	// jsonTexts is a subquery of the strings of a JSON array passed as
	// its one parameter (%s), so that one statement takes a list of any
	// length without a placeholder per item.
	jsonTexts string
}

// sqliteTimeLayout is fixed width so that stored times sort as text.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// migrationLockKey is the pg_advisory_xact_lock key taken while migrating
// ("meshroll" as a big-endian int64). Advisory locks are
// per database, so other applications' keys only clash within one database.
const migrationLockKey int64 = 0x6d657368726f6c6c

var (
	sqliteDialect = dialect{
		name:   "sqlite",
		driver: "sqlite",
		createMigrations: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TEXT NOT NULL
		) STRICT`,
		timeArg:   func(t time.Time) any { return t.UTC().Format(sqliteTimeLayout) },
		jsonTexts: "SELECT value FROM json_each(%s)",
	}
	postgresDialect = dialect{
		name:           "postgres",
		driver:         "pgx",
		lockMigrations: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", migrationLockKey),
		createMigrations: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at TIMESTAMPTZ NOT NULL
		)`,
		timeArg:   func(t time.Time) any { return t.UTC() },
		jsonTexts: "SELECT jsonb_array_elements_text(CAST(%s AS jsonb))",
	}
)

// target is a parsed DSN: which dialect, what to hand the driver, how to
// name it in messages, and the secrets no message may contain.
type target struct {
	dialect  dialect
	driver   string   // the driver's data source name
	shown    string   // redacted, for errors and String
	path     string   // SQLite only: the database file
	secrets  []string // passwords as written and as decoded
	original string
}

// sqlitePragmas are applied by the driver to every new connection: wait
// (rather than fail) while another connection or process writes, write-ahead
// logging so that readers never block the writer, and foreign keys on.
// _txlock=immediate makes BeginTx take the write lock at once, so that two
// processes migrating the same file serialise instead of one failing with
// SQLITE_BUSY on upgrading its read lock.
const sqlitePragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate"

func parseDSN(dsn string) (target, error) {
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		return parseSQLite(dsn)
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return parsePostgres(dsn)
	}
	scheme := "no scheme"
	if i := strings.Index(dsn, ":"); i > 0 && schemeRE.MatchString(dsn[:i]) {
		scheme = fmt.Sprintf("scheme %q", dsn[:i])
	}
	// The DSN itself is not repeated: it may hold a password in a form we
	// do not know how to redact.
	return target{}, fmt.Errorf("catalogue DSN has %s; want sqlite:<path>, or a postgres:// or postgresql:// URL", scheme)
}

func parseSQLite(dsn string) (target, error) {
	p := strings.TrimPrefix(dsn, "sqlite:")
	switch {
	case p == "":
		return target{}, errors.New("catalogue DSN sqlite: names no file; want sqlite:<path>")
	case p == ":memory:" || strings.HasPrefix(p, "file:"):
		// Each pooled connection would get a database of its own.
		return target{}, fmt.Errorf("catalogue DSN %s: want a file path, not an in-memory or URI database", dsn)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return target{}, fmt.Errorf("catalogue DSN %s: %w", dsn, err)
	}
	// A file: URI, so that a path holding '?', '#' or '%' is escaped rather
	// than read as parameters; SQLite decodes it (the driver opens with
	// SQLITE_OPEN_URI).
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: sqlitePragmas}
	if os.PathSeparator == '\\' { // file:///C:/x
		u.Path = "/" + u.Path
	}
	return target{
		dialect:  sqliteDialect,
		driver:   u.String(),
		shown:    "sqlite:" + abs,
		path:     abs,
		original: dsn,
	}, nil
}

func parsePostgres(dsn string) (target, error) {
	secrets := secretsOf(dsn)
	if _, err := url.Parse(dsn); err != nil {
		// url.Parse's message quotes the DSN, or the part of it where it
		// went wrong, which may be the password: keep the error in the
		// chain but not in the message.
		return target{}, &scrubbedError{msg: fmt.Sprintf("catalogue DSN %s is not a valid URL (escape special characters in the password with %%XX)", RedactDSN(dsn)), err: err}
	}
	return target{
		dialect:  postgresDialect,
		driver:   dsn,
		shown:    RedactDSN(dsn),
		secrets:  secrets,
		original: dsn,
	}, nil
}

const redacted = "xxxxx"

var (
	schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)
	// userPasswordRE captures the password of scheme://user:password@, up
	// to the last '@' (a password may hold an unescaped '/' or '@').
	userPasswordRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://[^/?#@:]*:(.*)@`)
	// userinfoRE matches everything up to the last '@', for DSNs that
	// url.Parse rejects or reads without user information.
	userinfoRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://).*@`)
	// passwordParamRE matches password=... as a URL query parameter or a
	// libpq key=value pair.
	passwordParamRE = regexp.MustCompile(`(?i)((?:^|[?&\s])password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)`)
)

// RedactDSN returns dsn with any password replaced by "xxxxx", for logs and
// messages: a catalogue DSN is configuration, and configuration is logged,
// but PostgreSQL's password must not end up in a log. A DSN too malformed to
// parse loses its whole user information, not only the password.
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "sqlite:") {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" || (u.User == nil && strings.Contains(dsn, "@")) {
		s := userinfoRE.ReplaceAllString(dsn, "${1}"+redacted+"@")
		return passwordParamRE.ReplaceAllString(s, "${1}"+redacted)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", redacted)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// secretsOf returns every form in which dsn's passwords could be quoted
// back: as written and as decoded.
func secretsOf(dsn string) []string {
	var out []string
	add := func(s string) {
		if s != "" && s != redacted {
			out = append(out, s)
			if d, err := url.QueryUnescape(s); err == nil && d != s {
				out = append(out, d)
			}
			if d, err := url.PathUnescape(s); err == nil && d != s {
				out = append(out, d)
			}
		}
	}
	if u, err := url.Parse(dsn); err == nil {
		if u.User != nil {
			p, _ := u.User.Password()
			add(p)
			add(url.UserPassword("", p).String()[1:]) // as re-encoded
		}
		for _, p := range u.Query()["password"] {
			add(p)
		}
	}
	// As written, even when url.Parse fails.
	if m := userPasswordRE.FindStringSubmatch(dsn); m != nil {
		add(m[1])
	}
	for _, m := range passwordParamRE.FindAllStringSubmatch(dsn, -1) {
		add(strings.Trim(m[2], "'"))
	}
	return out
}

// scrubbedError carries err's chain (errors.Is and errors.As still work) with
// a message in which no secret appears.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub returns err with dsn and every secret replaced in its message; err
// itself when its message holds none of them.
func scrub(err error, dsn string, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := msg
	if dsn != "" {
		clean = strings.ReplaceAll(clean, dsn, RedactDSN(dsn))
	}
	for _, s := range secrets {
		clean = strings.ReplaceAll(clean, s, redacted)
	}
	if clean == msg {
		return err
	}
	return &scrubbedError{msg: clean, err: err}
}

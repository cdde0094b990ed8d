-- Builds and where they converged. STRICT, so that SQLite holds the types
-- PostgreSQL would. Times are UTC text, 2006-01-02T15:04:05.000000Z (fixed
-- width, so they sort as text); id keeps recording order for ties.
CREATE TABLE builds (
    id         INTEGER PRIMARY KEY,
    module     TEXT    NOT NULL,
    "commit"   TEXT    NOT NULL,
    generation INTEGER NOT NULL,
    digest     TEXT    NOT NULL,
    image      TEXT    NOT NULL DEFAULT '',
    plan       TEXT    NOT NULL DEFAULT '',
    built_at   TEXT    NOT NULL,
    UNIQUE (module, "commit")
) STRICT;

CREATE INDEX builds_digest ON builds (digest, generation);
CREATE INDEX builds_module_generation ON builds (module, generation);

CREATE TABLE converged (
    digest  TEXT NOT NULL,
    machine TEXT NOT NULL,
    at      TEXT NOT NULL,
    UNIQUE (digest, machine)
) STRICT;

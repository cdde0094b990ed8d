-- Builds and where they converged. id keeps recording order for ties.
CREATE TABLE builds (
    id         BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    module     TEXT        NOT NULL,
    "commit"   TEXT        NOT NULL,
    generation BIGINT      NOT NULL,
    digest     TEXT        NOT NULL,
    image      TEXT        NOT NULL DEFAULT '',
    plan       TEXT        NOT NULL DEFAULT '',
    built_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (module, "commit")
);

CREATE INDEX builds_digest ON builds (digest, generation);
CREATE INDEX builds_module_generation ON builds (module, generation);

CREATE TABLE converged (
    digest  TEXT        NOT NULL,
    machine TEXT        NOT NULL,
    at      TIMESTAMPTZ NOT NULL,
    UNIQUE (digest, machine)
);

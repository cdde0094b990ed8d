-- Operators' rejections of builds: one per build (module and commit), never
-- updated or deleted. digest is the build's, copied so that the guard's
-- question "is this digest rejected?" reads one index; a digest is rejected
-- when any of its builds is. The reason is required: a rejection without one
-- leaves the next operator guessing.
CREATE TABLE rejections (
    module      TEXT        NOT NULL,
    "commit"    TEXT        NOT NULL,
    digest      TEXT        NOT NULL,
    rejected_by TEXT        NOT NULL DEFAULT '',
    reason      TEXT        NOT NULL CHECK (reason <> ''),
    rejected_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (module, "commit"),
    FOREIGN KEY (module, "commit") REFERENCES builds (module, "commit")
);

CREATE INDEX rejections_digest ON rejections (digest, rejected_at);

-- The fleet's picture: per machine, the newest report a watcher heard from
-- its host (JSON, NULL until heard), the host's revision of it, when it was
-- recorded and when the host last answered, and the last error asking it
-- with since when and last when. A row is replaced only by a newer revision
-- (revision 0: a host that does not long-poll), so watchers on several
-- workers leave the newest. Times as in 0001: fixed-width UTC text, which
-- compares as time.
CREATE TABLE host_reports (
    machine     TEXT PRIMARY KEY,
    revision    INTEGER NOT NULL DEFAULT 0,
    report      TEXT,
    changed_at  TEXT,
    heard_at    TEXT,
    error       TEXT NOT NULL DEFAULT '',
    error_since TEXT,
    error_at    TEXT
) STRICT;

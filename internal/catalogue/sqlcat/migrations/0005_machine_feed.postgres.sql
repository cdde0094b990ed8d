-- The worker's feed of the machine workflows' summaries (package
-- machinefeed), kept so that `starter status` reads it in one read rather
-- than listing every machine workflow: one row, its JSON (opaque here) and
-- the time the look that brought it up to date began.
CREATE TABLE machine_feed (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    as_of     TIMESTAMPTZ NOT NULL,
    summaries TEXT NOT NULL
);

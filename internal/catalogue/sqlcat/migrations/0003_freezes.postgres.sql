-- Operators' freezes: while a row has no lifted_at, plans in its scope hold
-- before their next tier or batch. module and machine are '' for "every".
-- A freeze is never deleted: unfreezing sets lifted_at and lifted_by, so the
-- table is the audit of who held the mesh, when and why. The reason is
-- required: a freeze without one leaves everyone it holds guessing.
CREATE TABLE freezes (
    id        BIGINT      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    module    TEXT        NOT NULL DEFAULT '',
    machine   TEXT        NOT NULL DEFAULT '',
    frozen_by TEXT        NOT NULL DEFAULT '',
    reason    TEXT        NOT NULL CHECK (reason <> ''),
    frozen_at TIMESTAMPTZ NOT NULL,
    lifted_by TEXT        NOT NULL DEFAULT '',
    lifted_at TIMESTAMPTZ
);

CREATE INDEX freezes_active ON freezes (module, machine) WHERE lifted_at IS NULL;

-- 0003: the backfills under way (records.backfill): a table's messages asked from its
-- journal through request/resend, page by page downwards from `top`, until `floor` or a
-- message older than `since`. `next_seq` is where the next page ends (kept as pages are
-- stored, so a restart goes on where it stood); the row goes once the backfill is done.
CREATE TABLE backfill (
    base      text        NOT NULL,
    top       bigint      NOT NULL CHECK (top >= 1),
    floor     bigint      NOT NULL CHECK (floor >= 1),
    next_seq  bigint      NOT NULL,
    since     timestamptz,
    reason    text        NOT NULL,
    started   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (base, top)
);

-- 0001: the store. Every message of every table, once, keyed by (table_id, seq)
-- (mqtt-api.md, Conventions: seq is strictly increasing per table and never reused), and
-- beside it one table per kind of result the reports and the integrity watch read.
-- Odds are numeric (exact decimals), never floating point.

CREATE TABLE message (
    table_id  text        NOT NULL,
    seq       bigint      NOT NULL CHECK (seq >= 1),
    topic     text        NOT NULL,   -- relative to the table's base topic
    ts        timestamptz NOT NULL,   -- the table's ts
    payload   jsonb       NOT NULL,   -- the message as published (a resend's marker removed)
    received  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, seq)
);
CREATE INDEX message_topic_ts ON message (topic, ts);

CREATE TABLE cover_all_result (
    table_id  text        NOT NULL,
    seq       bigint      NOT NULL,
    ts        timestamptz NOT NULL,
    round_id  integer     NOT NULL,
    game      text        NOT NULL,
    hands     smallint,               -- null for a round flagged before ROUND
    outcome   text        NOT NULL CHECK (outcome IN ('win', 'no_qualifier', 'void', 'flagged')),
    hand      text,                   -- the highest qualifying hand (win only)
    position  text,
    cards     text[],
    pays      numeric,                -- to 1 (win only)
    reason    text,
    PRIMARY KEY (table_id, seq),
    FOREIGN KEY (table_id, seq) REFERENCES message
);
CREATE INDEX cover_all_result_ts ON cover_all_result (ts);

CREATE TABLE craps_roll (
    table_id  text        NOT NULL,
    seq       bigint      NOT NULL,
    ts        timestamptz NOT NULL,
    roll_id   integer     NOT NULL,
    die1      smallint    NOT NULL CHECK (die1 BETWEEN 0 AND 6),
    die2      smallint    NOT NULL CHECK (die2 BETWEEN 0 AND 6),
    total     smallint,
    status    text        NOT NULL,
    reason    text,
    PRIMARY KEY (table_id, seq),
    FOREIGN KEY (table_id, seq) REFERENCES message
);
CREATE INDEX craps_roll_ts ON craps_roll (ts);

CREATE TABLE craps_result (
    table_id  text        NOT NULL,
    seq       bigint      NOT NULL,
    ts        timestamptz NOT NULL,
    roll_id   integer     NOT NULL,
    bet       text        NOT NULL,
    outcome   text        NOT NULL CHECK (outcome IN ('win', 'lose')),
    pays      numeric,                -- a craps/reversal with a later seq takes it back
    PRIMARY KEY (table_id, seq),
    FOREIGN KEY (table_id, seq) REFERENCES message
);
CREATE INDEX craps_result_ts ON craps_result (ts);

CREATE TABLE craps_reversal (
    table_id  text        NOT NULL,
    seq       bigint      NOT NULL,
    ts        timestamptz NOT NULL,
    roll_id   integer     NOT NULL,
    bet       text        NOT NULL,
    outcome   text        NOT NULL,
    PRIMARY KEY (table_id, seq),
    FOREIGN KEY (table_id, seq) REFERENCES message
);

CREATE TABLE bust_bonus_result (
    table_id      text        NOT NULL,
    seq           bigint      NOT NULL,
    ts            timestamptz NOT NULL,
    round_id      integer     NOT NULL,
    outcome       text        NOT NULL CHECK (outcome IN ('win', 'lose', 'flagged', 'void')),
    up_card       text,
    dealer_cards  text[]      NOT NULL,
    total         smallint,
    suited        boolean     NOT NULL,
    three_eights  boolean     NOT NULL,
    pays          numeric,
    paytable_row  text,
    pay_column    text,
    reason        text,
    PRIMARY KEY (table_id, seq),
    FOREIGN KEY (table_id, seq) REFERENCES message
);
CREATE INDEX bust_bonus_result_ts ON bust_bonus_result (ts);

-- Every alarm active in an `alarms` message: an alarm's start is its `since`, its end the
-- ts of the first later `alarms` message of the table without it (reports.sql).
CREATE TABLE alarm_snapshot (
    table_id         text        NOT NULL,
    seq              bigint      NOT NULL,
    ts               timestamptz NOT NULL,
    code             text        NOT NULL,
    device           text,
    message          text        NOT NULL,
    since            timestamptz NOT NULL,
    acknowledged_by  text,
    acknowledged_at  timestamptz,
    PRIMARY KEY (table_id, seq, code),
    FOREIGN KEY (table_id, seq) REFERENCES message
);

-- A table's answer to a request (`response/<name>`): the decision's outcome, with the
-- operator from the request it answers when the records service saw that request.
CREATE TABLE decision (
    table_id    text        NOT NULL,
    seq         bigint      NOT NULL,
    ts          timestamptz NOT NULL,
    name        text        NOT NULL,
    request_id  text,
    status      text        NOT NULL,
    error       text,
    PRIMARY KEY (table_id, seq),
    FOREIGN KEY (table_id, seq) REFERENCES message
);

-- Requests carry no seq (mqtt-api.md, Requests): kept as received, for their operator.
CREATE TABLE request (
    id          bigserial   PRIMARY KEY,
    table_id    text        NOT NULL,
    name        text        NOT NULL,
    request_id  text,
    operator    text,
    payload     jsonb       NOT NULL,
    received    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX request_table_request_id ON request (table_id, request_id);

-- `availability` is plain text without seq: each change as received.
CREATE TABLE availability (
    id        bigserial   PRIMARY KEY,
    table_id  text        NOT NULL,
    status    text        NOT NULL CHECK (status IN ('online', 'offline')),
    received  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX availability_table ON availability (table_id, id);

-- What a table could not resend any more: never silently missing.
CREATE TABLE gap (
    table_id  text        NOT NULL,
    from_seq  bigint      NOT NULL,
    to_seq    bigint      NOT NULL CHECK (to_seq >= from_seq),
    reason    text        NOT NULL,
    recorded  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_id, from_seq)
);

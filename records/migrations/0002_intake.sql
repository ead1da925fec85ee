-- 0002: where each table's feed stands (contract.feed.Feed.positions(): the last seq
-- released in order or given up as a gap), keyed by the table's base topic
-- (<prefix>/<table id>), so a restart asks the tables for what came meanwhile.
CREATE TABLE position (
    base  text   PRIMARY KEY,
    seq   bigint NOT NULL CHECK (seq >= 1)
);

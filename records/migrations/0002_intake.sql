-- 0002: where the intake has proved each table complete (records/intake.py), so a restart
-- goes on checking from there instead of trusting the highest seq stored.
CREATE TABLE confirmed (
    table_id  text   PRIMARY KEY,
    seq       bigint NOT NULL CHECK (seq >= 0)
);

-- tether PostgreSQL schema, version 2: operations (issue #11).
--
-- Queues an operator paused (`tether pause`). Workers read this small table every few
-- seconds and leave paused queues out of their claims, so the claim statement and the jobs
-- table are unchanged.
CREATE TABLE paused_queues (
    queue     text        PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now()
);

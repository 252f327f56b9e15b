-- tether PostgreSQL schema, version 9: reserved (no change).
--
-- Version 9 was set aside for another branch of issue #21/#22's work; the liveness tokens are
-- version 10 (0010_liveness.sql). Migrations must be numbered 1..N without gaps, so this file
-- holds the number until that branch's 0009 replaces it (the two must not both ship).
SELECT 1;

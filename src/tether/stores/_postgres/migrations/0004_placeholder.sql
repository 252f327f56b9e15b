-- tether PostgreSQL schema, version 4: a placeholder. Version 4 is written on another branch of
-- issue 18 (the failover slice); this branch's change is 0005, and the versions must run 1..N
-- without a gap. Whoever merges both deletes this file for the real 0004 (two version-4 files
-- make migrations() refuse to run); merged alone, this branch's 0005 is renumbered 0004.
SELECT 1;

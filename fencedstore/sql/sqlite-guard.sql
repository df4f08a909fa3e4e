-- fencekit's guard for SQLite (3.24 or later), to install in your own database:
--   sqlite3 app.db < sqlite-guard.sql
-- SQLite has no stored functions, so the guard is one statement the application runs inside
-- its own write transaction (BEGIN IMMEDIATE), before its write:
--
--   INSERT INTO fencekit_fences(lock, highest) VALUES(:lock, :token)
--     ON CONFLICT(lock) DO UPDATE SET highest = excluded.highest
--     WHERE fencekit_fences.highest <= excluded.highest;
--
-- then checks sqlite3_changes() (SELECT changes()): 1, the fence advanced (or was created) and
-- the write may go on; 0, the token is stale: ROLLBACK. BEGIN IMMEDIATE takes the database's
-- write lock first, so no other writer runs between the check and the commit.
-- docs/guard-in-your-database.md shows it in full.

CREATE TABLE IF NOT EXISTS fencekit_fences (
  lock TEXT PRIMARY KEY NOT NULL,
  highest INTEGER NOT NULL CHECK (highest >= 1)
) WITHOUT ROWID;

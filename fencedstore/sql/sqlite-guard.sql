-- fencekit's guard for SQLite (3.24 or later), to install in your own database:
--   sqlite3 app.db < sqlite-guard.sql
-- SQLite has no stored functions, so the guard is a view whose INSERT trigger checks and
-- advances the fence. The application runs it inside its own write transaction (BEGIN
-- IMMEDIATE), before its write:
--
--   INSERT INTO fencekit_advance(lock, token) VALUES(:lock, :token);
--
-- It fails, changing nothing, with SQLITE_CONSTRAINT and the message "FENCE stale token" when
-- the token is below the lock's fence (roll back: the write is stale), or "FENCEKIT_ARGUMENT:
-- ..." for a bad argument: a lock name that is not text of 1 to 1024 bytes without control
-- characters; a token that is neither an integer >= 1 nor the canonical decimal text of one
-- (1..9223372036854775807: no sign, no leading zero, no spaces, no '1e3'). A view's columns
-- have no type affinity, so the trigger sees the token as the application bound it.
-- BEGIN IMMEDIATE takes the database's write lock first, so no other writer runs between the
-- check and the commit. docs/guard-in-your-database.md shows it in full. Running this file
-- again is harmless.

-- The highest token accepted per lock. The CHECK keeps anything but an integer out, whoever
-- writes (a table made by an earlier version of this file lacks the typeof() check: see the
-- docs to remake it).
CREATE TABLE IF NOT EXISTS fencekit_fences (
  lock TEXT PRIMARY KEY NOT NULL,
  highest INTEGER NOT NULL CHECK (typeof(highest) = 'integer' AND highest >= 1)
) WITHOUT ROWID;

CREATE VIEW IF NOT EXISTS fencekit_advance(lock, token) AS SELECT NULL, NULL WHERE 0;

CREATE TRIGGER IF NOT EXISTS fencekit_advance INSTEAD OF INSERT ON fencekit_advance
BEGIN
  SELECT RAISE(ABORT, 'FENCEKIT_ARGUMENT: the lock name must be text of 1 to 1024 bytes without control characters')
   WHERE typeof(NEW.lock) <> 'text'
      OR length(CAST(NEW.lock AS BLOB)) NOT BETWEEN 1 AND 1024
      OR instr(CAST(NEW.lock AS BLOB), x'00') > 0
      OR NEW.lock GLOB '*[' || char(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                    18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
                                    127) || ']*';
  SELECT RAISE(ABORT, 'FENCEKIT_ARGUMENT: the fencing token must be an integer in 1..9223372036854775807')
   WHERE NOT CASE typeof(NEW.token)
     WHEN 'integer' THEN NEW.token >= 1
     WHEN 'text' THEN NEW.token GLOB '[1-9]*' AND NOT NEW.token GLOB '*[^0-9]*'
                      AND (length(NEW.token) < 19
                           OR (length(NEW.token) = 19 AND NEW.token <= '9223372036854775807'))
     ELSE 0 END;
  SELECT RAISE(ABORT, 'FENCE stale token')
    FROM fencekit_fences WHERE lock = NEW.lock AND highest > CAST(NEW.token AS INTEGER);
  UPDATE fencekit_fences SET highest = CAST(NEW.token AS INTEGER) WHERE lock = NEW.lock;
  INSERT INTO fencekit_fences(lock, highest)
    SELECT NEW.lock, CAST(NEW.token AS INTEGER)
     WHERE NOT EXISTS (SELECT 1 FROM fencekit_fences WHERE lock = NEW.lock);
END;

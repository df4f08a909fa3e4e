-- fencekit's guard for PostgreSQL (11 or later), to install in your own schema:
--   psql "$DATABASE_URL" -f postgresql-guard.sql
-- Call fencekit_advance(lock, token) inside the transaction that writes the data the lock
-- guards, before the write, and commit the two together. docs/guard-in-your-database.md says
-- why this is enough, and what the transaction must look like.

-- The highest token accepted per lock.
CREATE TABLE IF NOT EXISTS fencekit_fences (
  lock text PRIMARY KEY,
  highest bigint NOT NULL CHECK (highest >= 1)
);

-- Advances the fence of p_lock to p_token when p_token >= the highest token accepted so far
-- (or creates it), and returns p_token. Otherwise raises SQLSTATE 'FENCE' (the message names
-- the highest token), and the caller's transaction must roll back: its write is stale.
-- A bad argument raises SQLSTATE 22023 (invalid_parameter_value).
--
-- The upsert takes the fence row's lock until the caller's transaction ends, so two holders'
-- transactions on one lock run one after the other: under READ COMMITTED the later one
-- re-reads the row as the earlier one committed it and is judged against it. Under REPEATABLE
-- READ or SERIALIZABLE the later one fails with 40001 instead; retry it.
CREATE OR REPLACE FUNCTION fencekit_advance(p_lock text, p_token bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
  v_highest bigint;
BEGIN
  IF p_lock IS NULL OR p_lock = '' THEN
    RAISE EXCEPTION 'fencekit_advance: the lock name is empty' USING ERRCODE = '22023';
  END IF;
  IF p_token IS NULL OR p_token < 1 THEN
    RAISE EXCEPTION 'fencekit_advance: the fencing token must be a number >= 1'
      USING ERRCODE = '22023';
  END IF;
  INSERT INTO fencekit_fences AS f (lock, highest) VALUES (p_lock, p_token)
    ON CONFLICT (lock) DO UPDATE SET highest = excluded.highest
    WHERE f.highest <= excluded.highest
    RETURNING f.highest INTO v_highest;
  IF v_highest IS NULL THEN
    -- The row is locked by the upsert above even though it was not updated.
    SELECT f.highest INTO v_highest FROM fencekit_fences AS f WHERE f.lock = p_lock;
    RAISE EXCEPTION 'fencing token % for lock "%" is stale: the highest accepted is %',
      p_token, p_lock, v_highest
      USING ERRCODE = 'FENCE',
            HINT = 'the lease was lost; roll back, acquire the lock again and retry with its token';
  END IF;
  RETURN p_token;
END;
$$;

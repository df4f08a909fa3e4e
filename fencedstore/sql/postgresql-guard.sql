-- fencekit's guard for PostgreSQL (11 or later), to install in your own schema:
--   psql "$DATABASE_URL" -f postgresql-guard.sql
-- Call fencekit_advance(lock, token) inside the transaction that writes the data the lock
-- guards, before the write, and commit the two together. docs/guard-in-your-database.md says
-- why this is enough, and what the transaction must look like. Running it again is harmless.

-- The highest token accepted per lock.
CREATE TABLE IF NOT EXISTS fencekit_fences (
  lock text PRIMARY KEY,
  highest bigint NOT NULL CHECK (highest >= 1)
);

-- Advances the fence of p_lock to p_token when p_token >= the highest token accepted so far
-- (or creates it), and returns p_token. Otherwise raises SQLSTATE P0001 (raise_exception, as
-- MariaDB's guard raises 45000), message
--   FENCE stale token T for lock "L": the highest is H
-- (L with each byte outside printable ASCII, quote and backslash as \xNN), and the caller's
-- transaction must roll back: its write is stale. A bad argument raises SQLSTATE 22023
-- (invalid_parameter_value): a lock name that is empty, over 1024 bytes or holds a control
-- character; a token below 1. Names are text: one that is not valid in the database's encoding
-- (or holds a NUL byte) is refused by PostgreSQL itself before the call (22021).
--
-- The upsert takes the fence row's lock until the caller's transaction ends, so two holders'
-- transactions on one lock run one after the other: under READ COMMITTED the later one
-- re-reads the row as the earlier one committed it and is judged against it. Under REPEATABLE
-- READ or SERIALIZABLE the later one fails with 40001 instead; retry it.
--
-- search_path is pinned (below) to the schema it was installed in, then pg_temp: a session's
-- temporary table of the same name cannot stand in for the fences.
CREATE OR REPLACE FUNCTION fencekit_advance(p_lock text, p_token bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
  v_highest bigint;
  v_bytes bytea;
  v_shown text := '';
  v_byte int;
BEGIN
  IF p_lock IS NULL OR p_lock = '' OR octet_length(p_lock) > 1024
     OR p_lock ~ '[\x01-\x1f\x7f]' THEN
    RAISE EXCEPTION 'fencekit_advance: the lock name must be 1 to 1024 bytes without control characters'
      USING ERRCODE = '22023';
  END IF;
  IF p_token IS NULL OR p_token < 1 THEN
    RAISE EXCEPTION 'fencekit_advance: the fencing token must be an integer in 1..9223372036854775807'
      USING ERRCODE = '22023';
  END IF;
  INSERT INTO fencekit_fences AS f (lock, highest) VALUES (p_lock, p_token)
    ON CONFLICT (lock) DO UPDATE SET highest = excluded.highest
    WHERE f.highest <= excluded.highest
    RETURNING f.highest INTO v_highest;
  IF v_highest IS NULL THEN
    -- The row is locked by the upsert above even though it was not updated.
    SELECT f.highest INTO v_highest FROM fencekit_fences AS f WHERE f.lock = p_lock;
    v_bytes := convert_to(p_lock, 'UTF8');
    FOR i IN 0 .. length(v_bytes) - 1 LOOP
      v_byte := get_byte(v_bytes, i);
      v_shown := v_shown || CASE WHEN v_byte < 32 OR v_byte > 126 OR v_byte IN (34, 92)
                                 THEN '\x' || lpad(to_hex(v_byte), 2, '0')
                                 ELSE chr(v_byte) END;
    END LOOP;
    RAISE EXCEPTION 'FENCE stale token % for lock "%": the highest is %', p_token, v_shown, v_highest
      USING ERRCODE = 'P0001',
            HINT = 'the lease was lost; roll back, acquire the lock again and retry with its token';
  END IF;
  RETURN p_token;
END;
$$;

-- The same with the token as text, as a driver sends a string: it must be the token's
-- canonical decimal (1..9223372036854775807, no sign, no leading zero, no spaces); anything
-- else raises 22023, never PostgreSQL's own cast errors.
CREATE OR REPLACE FUNCTION fencekit_advance(p_lock text, p_token text)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
  IF p_token IS NULL OR p_token !~ '^[1-9][0-9]{0,18}$'
     OR (length(p_token) = 19 AND p_token COLLATE "C" > '9223372036854775807') THEN
    RAISE EXCEPTION 'fencekit_advance: the fencing token must be an integer in 1..9223372036854775807 (no sign, no leading zeros)'
      USING ERRCODE = '22023';
  END IF;
  RETURN fencekit_advance(p_lock, p_token::bigint);
END;
$$;

-- A token sent as bytes is no token.
CREATE OR REPLACE FUNCTION fencekit_advance(p_lock text, p_token bytea)
RETURNS bigint
LANGUAGE plpgsql
AS $$
BEGIN
  RAISE EXCEPTION 'fencekit_advance: the fencing token must be an integer in 1..9223372036854775807, not bytes'
    USING ERRCODE = '22023';
END;
$$;

DO $$
BEGIN
  EXECUTE format('ALTER FUNCTION fencekit_advance(text, bigint) SET search_path = %I, pg_temp',
                 current_schema());
  EXECUTE format('ALTER FUNCTION fencekit_advance(text, text) SET search_path = %I, pg_temp',
                 current_schema());
END;
$$;

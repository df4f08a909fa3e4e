-- pgbench script for bench/pg_bench.sh: the guarded write fenced does, done directly, one
-- transaction (one statement, autocommit) per write.
--
-- Each pgbench client is one lock holder: lock "bench-lock-<client_id>" (64 clients, 64 locks),
-- with a token that grows by one on every write, from the -D token=<base> the run starts at
-- (each run starts above the previous run's tokens). Every write therefore really advances its
-- fence, and no write is stale: a holder's tokens only grow and no other client uses its lock.
-- The key is random over 10,000 keys shared by all clients; the value is 100 bytes, as in
-- bench/put.lua.
--
-- The fence upsert is the one fencekit_advance (fencedstore/sql/postgresql-guard.sql) runs:
-- it takes the fence row's lock and moves the fence only when the token is >= the highest
-- accepted; the object is written only when it returned a row (so a stale write changes
-- nothing), with version + 1 as fenced does. bench/pg_bench.sh counts accepted writes as the
-- growth of sum(version) over the run.
\set key random(0, 9999)
\set token :token + 1
WITH fence AS (
  INSERT INTO baseline.fences AS f (lock, highest)
  VALUES (convert_to('bench-lock-' || (:client_id)::int, 'UTF8'), (:token)::bigint)
  ON CONFLICT (lock) DO UPDATE SET highest = excluded.highest
  WHERE f.highest <= excluded.highest
  RETURNING f.lock, f.highest
)
INSERT INTO baseline.objects AS o (key, value, lock, token, version)
SELECT convert_to('bench-' || (:key)::int, 'UTF8'), convert_to(repeat('v', 100), 'UTF8'),
       fence.lock, fence.highest, 1
FROM fence
ON CONFLICT (key) DO UPDATE SET value = excluded.value, lock = excluded.lock,
  token = excluded.token, version = o.version + 1;

#include "pg/functions.h"

namespace fencekit::fencedstore::pg {

// The functions fenced calls, at their latest version: made after migrating (a migration drops
// those whose signature changed, as CREATE OR REPLACE cannot change one).
const char* const kWriteFunctions = R"sql(
-- One write, decided and applied: the store's rules (docs/architecture.md) in one call, so that
-- a batch of writes is one pipeline of calls. The fence row is locked before it is judged and
-- stays locked until the commit, so every write, through any number of fenced, is decided on
-- the latest committed fence: shared (FOR SHARE) by a write that leaves it as it is (a holder's
-- next write at the fence's token, a refusal), so that such writes do not wait for each other's
-- commits; exclusively (FOR UPDATE) by one that moves, creates, binds or confirms it, which
-- therefore waits for every write holding it and they for it. The object's row is locked too
-- (FOR UPDATE) before its version is read.
-- p_verify: 0 verification off; 1 the lock service not asked (or could not be); 2 it does not
-- confirm the token; 3 it confirms it. p_refusal: a refusal decided by the caller, only recorded.
-- o_outcome: 'accepted' or the name of a refusal ('stale_token', 'wrong_lock', 'wrong_service',
-- 'unverified_token'), or 'verify' (the lock service must be asked first; nothing was changed or
-- recorded). A put takes its version from fencekit.versions; o_prior is the key's version
-- before the write (0: absent), read under the fence's lock.
CREATE OR REPLACE FUNCTION fencekit.write(
    p_delete boolean, p_lock bytea, p_token bigint, p_key bytea, p_value bytea,
    p_service text, p_prefix_lock bytea, p_verify integer, p_refusal text, p_strict boolean,
    p_unguarded boolean, p_now_ms bigint, p_principal bytea, p_record boolean,
    OUT o_outcome text, OUT o_highest bigint, OUT o_version bigint, OUT o_bound_lock bytea,
    OUT o_fence_service text, OUT o_seq bigint, OUT o_prior bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
  key_lock bytea;
  f_highest bigint;
  f_service text;
  f_confirmed boolean;
  fence_found boolean := false;
  fence_created boolean := false;
BEGIN
  o_outcome := p_refusal;
  o_highest := 0;
  o_version := 0;
  o_seq := 0;
  o_prior := 0;
  -- 1. The key's lock: lock_for's for its prefix, else the lock of the write that created it.
  -- The fence as last committed, unlocked, comes with it: it only chooses how to lock it.
  IF o_outcome IS NULL THEN
    SELECT (SELECT o.lock FROM fencekit.objects o WHERE o.key = p_key), fe.highest, fe.service,
           fe.confirmed
      INTO key_lock, f_highest, f_service, f_confirmed
      FROM (VALUES (1)) AS one LEFT JOIN fencekit.fences fe ON fe.lock = p_lock;
    key_lock := coalesce(p_prefix_lock, key_lock);
    IF key_lock IS NOT NULL AND key_lock <> p_lock THEN
      o_outcome := 'wrong_lock';
      o_bound_lock := key_lock;
    END IF;
  END IF;
  -- 2. The fence, locked; or created by the lock's first write.
  -- Shared when the write leaves the fence as it is: below it (stale), or at it with nothing new
  -- to bind or confirm (the UPDATE's own test, below). Judged on the unlocked read, then again
  -- on the locked one; a fence moved in between (only a fence administration can make it need
  -- a change then) is locked exclusively after all.
  FOR pass IN 1..2 LOOP
    EXIT WHEN o_outcome IS NOT NULL OR p_unguarded OR f_highest IS NULL
        OR NOT (p_token < f_highest
                OR (p_token = f_highest
                    AND (f_service IS NOT NULL OR p_service IS NULL OR p_verify NOT IN (0, 3))
                    AND (p_verify <> 3 OR f_confirmed)));
    IF pass = 2 THEN
      fence_found := true;
      EXIT;
    END IF;
    SELECT fe.highest, fe.service, fe.confirmed INTO f_highest, f_service, f_confirmed
      FROM fencekit.fences fe WHERE fe.lock = p_lock FOR SHARE;
  END LOOP;
  IF o_outcome IS NULL AND NOT fence_found THEN
    LOOP
      SELECT fe.highest, fe.service, fe.confirmed INTO f_highest, f_service, f_confirmed
        FROM fencekit.fences fe WHERE fe.lock = p_lock FOR UPDATE;
      IF FOUND THEN
        fence_found := true;
        EXIT;
      END IF;
      EXIT WHEN p_verify IN (1, 2) AND NOT p_unguarded;
      INSERT INTO fencekit.fences(lock, highest, service, confirmed)
        VALUES (p_lock, p_token, p_service, p_verify = 3) ON CONFLICT (lock) DO NOTHING;
      IF FOUND THEN
        fence_created := true;
        EXIT;
      END IF;
      -- Another transaction created it meanwhile: lock that one.
    END LOOP;
  END IF;
  IF o_outcome IS NULL THEN
    IF fence_created THEN
      o_highest := p_token;
    ELSIF NOT fence_found THEN
      o_outcome := CASE p_verify WHEN 1 THEN 'verify' ELSE 'unverified_token' END;
    ELSE
      o_highest := f_highest;
      IF p_unguarded THEN  -- every write, whatever its token and its service
        UPDATE fencekit.fences SET highest = greatest(highest, p_token),
            service = coalesce(service, p_service)
          WHERE lock = p_lock RETURNING highest INTO o_highest;
      ELSIF p_service IS NOT NULL AND f_service IS NOT NULL AND f_service <> p_service THEN
        o_outcome := 'wrong_service';
        o_fence_service := f_service;
      ELSIF p_token < f_highest OR (p_strict AND p_token = f_highest) THEN
        o_outcome := 'stale_token';
      ELSIF NOT (p_verify IN (0, 3) OR (NOT p_strict AND p_token = f_highest AND f_confirmed)) THEN
        o_outcome := CASE p_verify WHEN 1 THEN 'verify' ELSE 'unverified_token' END;
      ELSE
        -- A write at the fence's own token that binds and confirms nothing new (a holder's
        -- second write, the common case) leaves the locked row as it is.
        IF NOT (p_token = f_highest
                AND (f_service IS NOT NULL OR p_service IS NULL OR p_verify NOT IN (0, 3))
                AND (p_verify <> 3 OR f_confirmed)) THEN
          UPDATE fencekit.fences SET highest = p_token,
              service = coalesce(service, CASE WHEN p_verify IN (0, 3) THEN p_service END),
              confirmed = CASE WHEN p_verify = 3 THEN true
                               WHEN p_token = highest THEN confirmed ELSE false END
            WHERE lock = p_lock;
        END IF;
        o_highest := p_token;
      END IF;
    END IF;
  ELSE
    SELECT fe.highest INTO o_highest FROM fencekit.fences fe WHERE fe.lock = p_lock;
    o_highest := coalesce(o_highest, 0);
  END IF;
  IF o_outcome = 'verify' THEN
    RETURN;
  END IF;
  -- 3. The write itself.
  IF o_outcome IS NULL THEN
    IF p_delete THEN
      DELETE FROM fencekit.objects o
        WHERE o.key = p_key AND (p_prefix_lock IS NOT NULL OR o.lock = p_lock)
        RETURNING o.version INTO o_version;
      o_version := coalesce(o_version, 0);
      o_prior := o_version;
    ELSE
      -- Writers at the fence's token may hold it together: the key's row lock orders them,
      -- and o_prior is read under it.
      LOOP
        SELECT o.version, o.lock INTO o_prior, key_lock FROM fencekit.objects o
          WHERE o.key = p_key FOR UPDATE;
        IF FOUND THEN
          IF p_prefix_lock IS NULL AND key_lock <> p_lock THEN
            -- The key was created under another lock after step 1: decide again.
            RAISE EXCEPTION 'the key was created under another lock meanwhile'
              USING ERRCODE = 'serialization_failure';
          END IF;
          UPDATE fencekit.objects SET value = p_value, lock = p_lock, token = p_token,
              version = nextval('fencekit.versions')
            WHERE key = p_key RETURNING version INTO o_version;
          EXIT;
        END IF;
        o_prior := 0;
        INSERT INTO fencekit.objects(key, value, lock, token, version)
          VALUES (p_key, p_value, p_lock, p_token, nextval('fencekit.versions'))
          ON CONFLICT (key) DO NOTHING RETURNING version INTO o_version;
        EXIT WHEN FOUND;
        -- Another transaction created it meanwhile: lock that one.
      END LOOP;
    END IF;
    o_outcome := 'accepted';
  END IF;
  -- 4. The record of the decision.
  IF p_record THEN
    INSERT INTO fencekit.history(time_ms, op, lock, token, key, accepted, highest, reason,
                                 principal)
      VALUES (p_now_ms, CASE WHEN p_delete THEN 'delete' ELSE 'put' END, p_lock, p_token, p_key,
              o_outcome = 'accepted', o_highest, nullif(o_outcome, 'accepted'), p_principal)
      RETURNING seq INTO o_seq;
  END IF;
END
$fn$;

-- Whether a write at p_token naming p_service (NULL: none) leaves the fence (f_highest,
-- f_service) as it is, refused or not, with verification off and no other rule against it:
-- below the fence (stale; unless it names another service than the fence's: wrong_service), or
-- at it naming no service or the fence's own (accepted, binding nothing). Never NULL. Inlined
-- where it is called (one SQL expression).
CREATE OR REPLACE FUNCTION fencekit.leaves_fence(p_token bigint, p_service text,
                                                 f_highest bigint, f_service text)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $fn$
  SELECT coalesce(p_token <= f_highest
                  AND (p_service IS NULL OR p_service = f_service
                       OR (p_token < f_highest AND f_service IS NULL)), false)
$fn$;

-- Unconditional writes of a batch, each under its own grant, in order, decided by the rules of
-- fencekit.write: one call per batch rather than one per write, the decisions recorded in one
-- INSERT at the end rather than one per write. p_lock_fences[i]: lock write i's fence
-- exclusively before deciding it (see Attempt in engine.cc). Returns one row per write, in
-- order, as fencekit.write's.
--
-- The common batch is decided for all its writes at once (one statement to check the order,
-- one per lock, one that decides, writes and records them all, rather than about five per
-- write): puts that leave their fences as they are (a holder's writes at its fence's token, and
-- stale ones), given in (lock, key) order with no pair twice, without verification, strict or
-- unguarded mode or lock_for prefixes. The locks are taken as fencekit.write takes them, lock
-- by lock in that order: the fence shared, then the keys its accepted writes change. A batch
-- with a lock whose writes would move its fence (or whose fence is missing) goes write by write
-- from there, still in that order, holding the fences it has locked shared (which its writes
-- leave as they are, so none of them needs the lock raised). A lock without a fence whose
-- writes here all carry one token and one service, on keys no other lock holds, gets its fence
-- made at that token, as its first write would make it, and stays in the common batch: with a
-- lock per entity most writes are their lock's first.
CREATE OR REPLACE FUNCTION fencekit.write_many(
    p_deletes boolean[], p_locks bytea[], p_tokens bigint[], p_keys bytea[], p_values bytea[],
    p_services text[], p_prefix_locks bytea[], p_verifies bigint[], p_refusals text[],
    p_principals bytea[], p_lock_fences boolean[], p_strict boolean, p_unguarded boolean,
    p_now_ms bigint, p_record boolean)
RETURNS TABLE(o_outcome text, o_highest bigint, o_version bigint, o_bound_lock bytea,
              o_fence_service text, o_prior bigint)
-- Its statements join a batch's few writes to the tables by key; planned for an unknown number
-- of writes (a thousand, for generate_series), they would scan and hash whole tables instead.
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
LANGUAGE plpgsql AS $fn$
DECLARE
  n integer := coalesce(array_length(p_keys, 1), 0);
  w record;
  outcomes text[] := array_fill(NULL::text, ARRAY[n]);
  highests bigint[] := array_fill(NULL::bigint, ARRAY[n]);
  versions bigint[];
  priors bigint[];
  together boolean := false;
  fence_lock bytea;
  last integer;
  made bytea[] := '{}';  -- the locks whose fences this call made
BEGIN
  IF n > 0 AND NOT (p_strict OR p_unguarded OR true = ANY (p_deletes)
                    OR true = ANY (p_lock_fences) OR 0 <> ANY (p_verifies))
      AND num_nonnulls(VARIADIC p_prefix_locks) = 0
      AND num_nonnulls(VARIADIC p_refusals) = 0 THEN
    -- In (lock, key) order, each pair once: the locks are then taken in fencekit.write's order,
    -- and no key is written twice by one statement. Checked on the arguments alone; the fences
    -- are judged below once locked, and a key under another lock is left undecided by the
    -- statement that writes and so decided by fencekit.write.
    SELECT coalesce(bool_and(p_locks[g.i - 1] < p_locks[g.i]
                             OR (p_locks[g.i - 1] = p_locks[g.i]
                                 AND p_keys[g.i - 1] < p_keys[g.i])), true)
      INTO together
      FROM generate_series(2, n) AS g(i);
    IF together THEN
      -- Lock by lock, in the (lock, key) order checked above.
      FOR i IN 1..n LOOP
        CONTINUE WHEN i > 1 AND p_locks[i] = p_locks[i - 1];
        fence_lock := p_locks[i];
        -- Its writes are i..last (in that order they are together): each lock's statements look
        -- at its own writes, not the batch's, so that a batch of many locks costs no more per
        -- write than one of a few.
        last := i;
        WHILE last < n AND p_locks[last + 1] = fence_lock LOOP
          last := last + 1;
        END LOOP;
        FOR pass IN 1..2 LOOP
          -- The fence locked shared only if all its writes leave it as it is (judged on its
          -- latest version: a row changed meanwhile is read again before it is locked), so that
          -- none of them would need the lock raised; then the keys of those at its token locked
          -- (the outer query runs on the locked row).
          SELECT (SELECT count(*) >= 0
                    FROM (SELECT 1 FROM fencekit.objects ob
                            WHERE ob.key = ANY (ARRAY(
                                    SELECT p_keys[h.j] FROM generate_series(i, last) AS h(j)
                                      WHERE p_tokens[h.j] = fe.highest))
                            ORDER BY ob.key FOR UPDATE) AS keys)
            INTO together
            FROM (SELECT f.highest, f.service FROM fencekit.fences f
                    WHERE f.lock = fence_lock
                      AND NOT EXISTS (
                            SELECT 1 FROM generate_series(i, last) AS g(j)
                              WHERE NOT fencekit.leaves_fence(p_tokens[g.j], p_services[g.j],
                                                              f.highest, f.service))
                  FOR SHARE) AS fe;
          EXIT WHEN FOUND OR pass = 2;  -- a simple expression: no query run for it
          EXIT WHEN EXISTS (SELECT 1 FROM fencekit.fences f WHERE f.lock = fence_lock);
          -- No fence: a write of this lock would make it. The first writes of this lock and of
          -- the batch's next locks without fences make theirs (in one statement, in lock order)
          -- at their token, unless a lock's writes differ (in token or service: then some would
          -- move it) or one of its keys is another lock's (a refusal, which makes no fence).
          WITH mine AS MATERIALIZED (
                 SELECT p_locks[g.j] AS lock, p_tokens[g.j] AS token, p_services[g.j] AS service,
                        p_keys[g.j] AS key
                   FROM generate_series(i, n) AS g(j)
                   WHERE NOT EXISTS (SELECT 1 FROM fencekit.fences f
                                       WHERE f.lock = p_locks[g.j])),
               fresh AS (
                 SELECT m.lock, min(m.token) AS token, min(m.service) AS service
                   FROM mine m LEFT JOIN fencekit.objects ob ON ob.key = m.key
                   GROUP BY m.lock
                   HAVING min(m.token) = max(m.token)
                      AND (count(m.service) = 0
                           OR (count(m.service) = count(*) AND min(m.service) = max(m.service)))
                      AND NOT bool_or(coalesce(ob.lock <> m.lock, false))),
               made_now AS (
                 INSERT INTO fencekit.fences(lock, highest, service, confirmed)
                   SELECT lock, token, service, false FROM fresh ORDER BY lock
                   ON CONFLICT (lock) DO NOTHING
                   RETURNING lock)
          SELECT made || coalesce(array_agg(lock), '{}') INTO made FROM made_now;
        END LOOP;
        -- A write that would move it, or no fence: write by write from here, which locks each
        -- fence as its writes need.
        together := coalesce(together, false);
        EXIT WHEN NOT together;
      END LOOP;
    END IF;
  END IF;
  IF together THEN
    -- Every fence is locked and stays as it is: below it stale, at it accepted. The accepted
    -- writes' keys that existed are locked, so this statement reads their current versions.
    -- A write it leaves undecided (NULL: its key created by another transaction since it was
    -- found absent, or under another lock) is decided below by fencekit.write. Versions are
    -- taken in the batch's order before the writes, so that a write's outcome and version need
    -- no join of the writes with the rows changed and created (a nested loop, as hash and merge
    -- joins are off: quadratic in the writes); only when some write was not made are they
    -- looked up.
    WITH d AS MATERIALIZED (
           SELECT g.i, p_keys[g.i] AS key, fe.highest, p_tokens[g.i] = fe.highest AS ok,
                  ob.version AS prior, wr.written,
                  CASE WHEN wr.written THEN nextval('fencekit.versions') END AS version
             FROM generate_series(1, n) AS g(i)
             JOIN fencekit.fences fe ON fe.lock = p_locks[g.i]
             LEFT JOIN fencekit.objects ob ON ob.key = p_keys[g.i]
             -- To be written: accepted, its key this lock's (changed) or absent (created).
             CROSS JOIN LATERAL (
               SELECT p_tokens[g.i] = fe.highest AND coalesce(ob.lock = p_locks[g.i], true)
                        AS written) AS wr),
         changed AS (
           UPDATE fencekit.objects ob SET value = p_values[d.i], lock = p_locks[d.i],
               token = p_tokens[d.i], version = d.version
             FROM d
             WHERE d.written AND d.prior IS NOT NULL AND ob.key = d.key
             RETURNING d.i),
         created AS (
           INSERT INTO fencekit.objects(key, value, lock, token, version)
             SELECT d.key, p_values[d.i], p_locks[d.i], p_tokens[d.i], d.version
               FROM d WHERE d.written AND d.prior IS NULL ORDER BY d.i
             ON CONFLICT (key) DO NOTHING
             RETURNING key),
         decided AS MATERIALIZED (
           SELECT d.i, d.highest,
                  CASE WHEN NOT d.ok THEN 'stale_token'
                       WHEN NOT d.written THEN NULL
                       -- Every write made (the common case): nothing looked up.
                       WHEN (SELECT count(*) FROM changed) + (SELECT count(*) FROM created)
                              = (SELECT count(*) FROM d a WHERE a.written) THEN 'accepted'
                       WHEN d.i IN (SELECT i FROM changed) OR d.key IN (SELECT key FROM created)
                         THEN 'accepted' END AS outcome,
                  d.version, CASE WHEN d.ok THEN coalesce(d.prior, 0) ELSE 0 END AS prior
             FROM d),
         -- One row of fencekit.history_runs, in the call's order: a seq (drawn in that order,
         -- the fences locked) and an outcome per write decided here, NULL for one left below.
         recorded AS (
           INSERT INTO fencekit.history_runs(last_seq, time_ms, seqs, locks, tokens, keys,
                                             outcomes, highests, principals)
             SELECT max(s.seq), p_now_ms, array_agg(s.seq), p_locks, p_tokens, p_keys,
                    array_agg(s.outcome), array_agg(s.highest), p_principals
               FROM (SELECT CASE WHEN o.outcome IS NOT NULL
                                 THEN nextval('fencekit.history_seq_seq') END AS seq,
                            o.outcome, o.highest
                       FROM (SELECT outcome, highest FROM decided ORDER BY i) AS o) AS s
               HAVING p_record AND count(s.seq) > 0)
    SELECT array_agg(outcome ORDER BY i), array_agg(highest ORDER BY i),
           array_agg(CASE WHEN outcome = 'accepted' THEN version ELSE 0 END ORDER BY i),
           array_agg(prior ORDER BY i)
      INTO outcomes, highests, versions, priors
      FROM decided;
    FOR i IN 1..n LOOP
      IF outcomes[i] IS NULL THEN
        SELECT * INTO w FROM fencekit.write(false, p_locks[i], p_tokens[i], p_keys[i],
            p_values[i], p_services[i], NULL, 0, NULL, false, false, p_now_ms,
            p_principals[i], p_record);
        IF w.o_outcome = 'wrong_lock' AND p_locks[i] = ANY (made) THEN
          -- Its key was made under another lock since this call looked: the fence made for
          -- this lock may be one its writes would not have made. The batch runs again (also
          -- below).
          RAISE EXCEPTION 'a key was created under another lock meanwhile'
            USING ERRCODE = 'serialization_failure';
        END IF;
        outcomes[i] := w.o_outcome;
        highests[i] := w.o_highest;
        versions[i] := w.o_version;
        priors[i] := w.o_prior;
      END IF;
    END LOOP;
    RETURN QUERY
      SELECT u.outcome, u.highest, u.version, NULL::bytea, NULL::text, u.prior
        FROM unnest(outcomes, highests, versions, priors) AS u(outcome, highest, version, prior);
    RETURN;
  END IF;
  FOR i IN 1..n LOOP
    IF p_lock_fences[i] THEN
      PERFORM 1 FROM fencekit.fences fe WHERE fe.lock = p_locks[i] FOR UPDATE;
    END IF;
    SELECT * INTO w FROM fencekit.write(p_deletes[i], p_locks[i], p_tokens[i], p_keys[i],
        p_values[i], p_services[i], p_prefix_locks[i], p_verifies[i]::integer, p_refusals[i],
        p_strict, p_unguarded, p_now_ms, p_principals[i], false);
    IF w.o_outcome = 'wrong_lock' AND p_locks[i] = ANY (made) THEN
      RAISE EXCEPTION 'a key was created under another lock meanwhile'
        USING ERRCODE = 'serialization_failure';
    END IF;
    outcomes[i] := w.o_outcome;
    highests[i] := w.o_highest;
    o_outcome := w.o_outcome;
    o_highest := w.o_highest;
    o_version := w.o_version;
    o_bound_lock := w.o_bound_lock;
    o_fence_service := w.o_fence_service;
    o_prior := w.o_prior;
    RETURN NEXT;
  END LOOP;
  -- A write left for the lock service ('verify') is recorded when it comes back decided.
  IF p_record THEN
    INSERT INTO fencekit.history(time_ms, op, lock, token, key, accepted, highest, reason,
                                 principal)
      SELECT p_now_ms, CASE WHEN p_deletes[g.i] THEN 'delete' ELSE 'put' END, p_locks[g.i],
             p_tokens[g.i], p_keys[g.i], outcomes[g.i] = 'accepted', highests[g.i],
             nullif(outcomes[g.i], 'accepted'), p_principals[g.i]
        FROM generate_series(1, n) AS g(i)
        WHERE outcomes[g.i] <> 'verify'
        ORDER BY g.i;
  END IF;
END
$fn$;

-- Several writes under one grant (p_lock, p_token), in order, each seeing the ones before it,
-- applied all or none: in a subtransaction that a refusal (of fencekit.write, or of a write's
-- version precondition p_if_versions[i]: NULL none, 0 absent, N version N) rolls back, so that
-- nothing else of the caller's transaction is undone. Returns one row per write when all are
-- accepted; else one row: the refusal (or 'verify': nothing changed or recorded), o_index the
-- refusing write (from 0), o_prior the key's version for 'precondition_failed'. A refusal is
-- recorded once, as the refusing write.
CREATE OR REPLACE FUNCTION fencekit.write_batch(
    p_lock bytea, p_token bigint, p_service text, p_verify integer, p_refusal text,
    p_strict boolean, p_unguarded boolean, p_now_ms bigint, p_principal bytea,
    p_record boolean, p_deletes boolean[], p_keys bytea[], p_values bytea[],
    p_prefix_locks bytea[], p_if_versions bigint[])
RETURNS TABLE(o_outcome text, o_highest bigint, o_index integer, o_version bigint,
              o_prior bigint, o_bound_lock bytea, o_fence_service text)
LANGUAGE plpgsql AS $fn$
DECLARE
  n integer := coalesce(array_length(p_keys, 1), 0);
  w record;
  versions bigint[] := '{}';
  priors bigint[] := '{}';
  culprit integer := 0;
  r_outcome text;
  r_highest bigint := 0;
  r_prior bigint := 0;
  r_bound bytea;
  r_service text;
BEGIN
  BEGIN
    FOR i IN 1..n LOOP
      SELECT * INTO w FROM fencekit.write(p_deletes[i], p_lock, p_token, p_keys[i], p_values[i],
          p_service, p_prefix_locks[i], p_verify, p_refusal, p_strict, p_unguarded, p_now_ms,
          p_principal, p_record);
      r_highest := w.o_highest;
      IF w.o_outcome <> 'accepted' THEN
        culprit := i;
        r_outcome := w.o_outcome;
        r_bound := w.o_bound_lock;
        r_service := w.o_fence_service;
        RAISE EXCEPTION USING ERRCODE = 'FKB01';
      END IF;
      IF p_if_versions[i] IS NOT NULL AND p_if_versions[i] <> w.o_prior THEN
        culprit := i;
        r_outcome := 'precondition_failed';
        r_prior := w.o_prior;
        RAISE EXCEPTION USING ERRCODE = 'FKB01';
      END IF;
      versions := versions || w.o_version;
      priors := priors || w.o_prior;
    END LOOP;
  EXCEPTION WHEN SQLSTATE 'FKB01' THEN
    -- Everything the batch did is undone; the variables say why.
  END;
  IF culprit > 0 THEN
    SELECT fe.highest INTO r_highest FROM fencekit.fences fe WHERE fe.lock = p_lock;
    r_highest := coalesce(r_highest, 0);
    IF r_outcome <> 'verify' AND p_record THEN
      INSERT INTO fencekit.history(time_ms, op, lock, token, key, accepted, highest, reason,
                                   principal)
        VALUES (p_now_ms, CASE WHEN p_deletes[culprit] THEN 'delete' ELSE 'put' END, p_lock,
                p_token, p_keys[culprit], false, r_highest, r_outcome, p_principal);
    END IF;
    RETURN QUERY SELECT r_outcome, r_highest, culprit - 1, 0::bigint, r_prior, r_bound,
                        r_service;
    RETURN;
  END IF;
  FOR i IN 1..n LOOP
    RETURN QUERY SELECT 'accepted'::text, r_highest, i - 1, versions[i], priors[i],
                        NULL::bytea, NULL::text;
  END LOOP;
END
$fn$;
)sql";

}  // namespace fencekit::fencedstore::pg

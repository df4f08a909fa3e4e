-- fencekit's guard for MariaDB (10.2 or later; tested on 10.11), to install in your own database:
--   mariadb -h HOST -u USER DATABASE < mariadb-guard.sql
-- (DELIMITER below is the command-line client's; another loader sends the CREATE PROCEDURE
-- statement as one statement without it.) Running it again is harmless.
-- Call fencekit_advance(lock, token) first in the transaction that writes the data the lock
-- guards, and commit the two together:
--   START TRANSACTION; CALL fencekit_advance('order-1', 34); UPDATE ...; COMMIT;
-- On a stale token the CALL fails with SQLSTATE 45000, message "FENCE: ...", and changes
-- nothing. MariaDB does not abort the transaction on an error: the caller must ROLLBACK (a
-- COMMIT would keep what the transaction wrote before the call). docs/guard-in-your-database.md
-- says why this is enough.

-- The highest token accepted per lock. The name is compared byte for byte (VARBINARY: no
-- case folding, no trailing-space padding, whatever the server's default collation).
CREATE TABLE IF NOT EXISTS fencekit_fences (
  lock_name VARBINARY(255) NOT NULL PRIMARY KEY,
  highest BIGINT NOT NULL,
  CONSTRAINT fencekit_fences_highest CHECK (highest >= 1)
) ENGINE=InnoDB;

DROP PROCEDURE IF EXISTS fencekit_advance;

DELIMITER //
-- Advances the fence of p_lock to p_token when p_token >= the highest token accepted so far
-- (or creates it). Otherwise SIGNALs SQLSTATE 45000, MESSAGE_TEXT "FENCE: fencing token T for
-- lock "L" is stale: the highest accepted is H". A bad argument (NULL or empty lock, a lock
-- over 255 bytes, a NULL token or one below 1) SIGNALs SQLSTATE 22023, MESSAGE_TEXT
-- "FENCEKIT_ARGUMENT: ...". Neither changes the fence.
--
-- Serialization: the upsert inserts the row or takes its exclusive row lock, which the caller's
-- transaction keeps until it ends; so two holders' transactions on one lock run one after the
-- other, and the later one is judged against what the earlier one committed, under every
-- isolation level (the upsert and the locking read below see the latest committed row, never
-- a REPEATABLE READ snapshot). A first advance of a new lock needs no prior read: a second
-- session's upsert waits on the first one's new row (no SELECT ... FOR UPDATE on an absent
-- row, whose gap locks let two sessions both reach the insert and deadlock). GREATEST never
-- lowers the fence, so the upsert changes nothing when the token is stale.
-- Inside a procedure, a CALL in autocommit mode commits each statement on its own: the fence is
-- still never lowered, but guard writes only inside an explicit transaction.
CREATE PROCEDURE fencekit_advance(IN p_lock VARBINARY(1024), IN p_token BIGINT)
  MODIFIES SQL DATA
  SQL SECURITY INVOKER
BEGIN
  DECLARE v_highest BIGINT;
  DECLARE v_message VARCHAR(512);
  IF p_lock IS NULL OR LENGTH(p_lock) = 0 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'FENCEKIT_ARGUMENT: the lock name is NULL or empty';
  END IF;
  IF LENGTH(p_lock) > 255 THEN
    SIGNAL SQLSTATE '22023'
      SET MESSAGE_TEXT = 'FENCEKIT_ARGUMENT: the lock name is longer than 255 bytes';
  END IF;
  IF p_token IS NULL OR p_token < 1 THEN
    SIGNAL SQLSTATE '22023'
      SET MESSAGE_TEXT = 'FENCEKIT_ARGUMENT: the fencing token must be a number >= 1';
  END IF;
  INSERT INTO fencekit_fences (lock_name, highest) VALUES (p_lock, p_token)
    ON DUPLICATE KEY UPDATE highest = GREATEST(highest, VALUES(highest));
  -- FOR UPDATE: the latest committed value (this transaction holds the row's lock already).
  SELECT highest INTO v_highest FROM fencekit_fences WHERE lock_name = p_lock FOR UPDATE;
  IF v_highest > p_token THEN
    SET v_message = CONCAT('FENCE: fencing token ', p_token, ' for lock "',
                              CONVERT(p_lock USING utf8mb4),
                              '" is stale: the highest accepted is ', v_highest);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END //
DELIMITER ;

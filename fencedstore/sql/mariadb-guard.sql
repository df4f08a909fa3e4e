-- fencekit's guard for MariaDB (10.2 or later; tested on 10.11), to install in your own database:
--   mariadb -h HOST -u USER DATABASE < mariadb-guard.sql
-- (DELIMITER below is the command-line client's; another loader sends each CREATE TRIGGER and
-- CREATE PROCEDURE statement as one statement without it.) Running it again is harmless.
-- In the transaction that writes the data the lock guards, advance the lock's fence first and
-- commit the two together, with the plain statement (no CALL; it can share a query with START
-- TRANSACTION or the write)
--   START TRANSACTION;
--   INSERT INTO fencekit_fences (lock_name, highest) VALUES ('order-1', 34)
--     ON DUPLICATE KEY UPDATE highest = VALUES(highest);
--   UPDATE ...; COMMIT;
-- or with CALL fencekit_advance('order-1', 34), which checks its arguments first. On a stale
-- token either fails with SQLSTATE 45000, message "FENCE: ...", and changes nothing: the
-- triggers below refuse to lower a fence, whoever tries. MariaDB does not abort the transaction
-- on an error: the caller must ROLLBACK (a COMMIT would keep what the transaction wrote before
-- the failed statement). docs/guard-in-your-database.md says why this is enough.
-- Creating triggers with binary logging on needs SUPER or log_bin_trust_function_creators=1.

-- The highest token accepted per lock. The name is compared byte for byte (VARBINARY: no
-- case folding, no trailing-space padding, whatever the server's default collation).
-- To reset a fence (a new lock service that starts again from token 1), DELETE its row.
CREATE TABLE IF NOT EXISTS fencekit_fences (
  lock_name VARBINARY(255) NOT NULL PRIMARY KEY,
  highest BIGINT NOT NULL,
  CONSTRAINT fencekit_fences_highest CHECK (highest >= 1)
) ENGINE=InnoDB;

-- CREATE OR REPLACE: one statement each, under the table's metadata lock, so a reload never
-- leaves a moment without the trigger (a DROP then a CREATE would: the plain statement would
-- then lower a fence unchecked). MySQL has no CREATE OR REPLACE TRIGGER: there, DROP TRIGGER IF
-- EXISTS and CREATE TRIGGER while no writer runs.
DELIMITER //
-- A new fence, and the inserted values of an upsert (which fires this before it finds the
-- duplicate): an empty or NULL lock name, a NULL token or one below 1 SIGNAL SQLSTATE 22023,
-- MESSAGE_TEXT "FENCEKIT_ARGUMENT: ...". (A name over 255 bytes fails before, as too long for
-- the column: SQLSTATE 22001 in strict mode, MariaDB's default; outside strict mode the name
-- would be cut to 255 bytes, so there keep names shorter or CALL fencekit_advance.)
CREATE OR REPLACE TRIGGER fencekit_fences_arguments BEFORE INSERT ON fencekit_fences FOR EACH ROW
BEGIN
  IF NEW.lock_name IS NULL OR LENGTH(NEW.lock_name) = 0 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'FENCEKIT_ARGUMENT: the lock name is NULL or empty';
  END IF;
  IF NEW.highest IS NULL OR NEW.highest < 1 THEN
    SIGNAL SQLSTATE '22023'
      SET MESSAGE_TEXT = 'FENCEKIT_ARGUMENT: the fencing token must be a number >= 1';
  END IF;
END //

-- The guard: a fence is never lowered. An update to a lower token SIGNALs SQLSTATE 45000,
-- MESSAGE_TEXT "FENCE: fencing token T for lock "L" is stale: the highest accepted is H", and
-- the statement changes nothing. An equal token is accepted.
--
-- Serialization: the upsert inserts the row or takes its exclusive row lock, which the caller's
-- transaction keeps until it ends; so two holders' transactions on one lock run one after the
-- other, and the later one is judged against what the earlier one committed, under every
-- isolation level (an upsert's update reads the latest committed row, never a REPEATABLE READ
-- snapshot; OLD below is that row). A first advance of a new lock needs no prior read: a second
-- session's upsert waits on the first one's new row (no SELECT ... FOR UPDATE on an absent row,
-- whose gap locks let two sessions both reach the insert and deadlock).
CREATE OR REPLACE TRIGGER fencekit_fences_never_lower BEFORE UPDATE ON fencekit_fences FOR EACH ROW
BEGIN
  DECLARE v_message VARCHAR(512);
  IF NEW.highest < OLD.highest THEN
    SET v_message = CONCAT('FENCE: fencing token ', NEW.highest, ' for lock "',
                           CONVERT(OLD.lock_name USING utf8mb4),
                           '" is stale: the highest accepted is ', OLD.highest);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END //

-- The same advance as a procedure (the form before the plain statement): it checks the lock name's
-- length itself (SQLSTATE 22023 over 255 bytes, also outside strict mode), then upserts.
-- Inside a procedure, a CALL in autocommit mode commits each statement on its own: the fence is
-- still never lowered, but guard writes only inside an explicit transaction.
CREATE OR REPLACE PROCEDURE fencekit_advance(IN p_lock VARBINARY(1024), IN p_token BIGINT)
  MODIFIES SQL DATA
  SQL SECURITY INVOKER
BEGIN
  IF LENGTH(p_lock) > 255 THEN
    SIGNAL SQLSTATE '22023'
      SET MESSAGE_TEXT = 'FENCEKIT_ARGUMENT: the lock name is longer than 255 bytes';
  END IF;
  INSERT INTO fencekit_fences (lock_name, highest) VALUES (p_lock, p_token)
    ON DUPLICATE KEY UPDATE highest = VALUES(highest);
END //
DELIMITER ;

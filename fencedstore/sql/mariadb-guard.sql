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
-- or with CALL fencekit_advance('order-1', '34'), which checks its arguments first (the token
-- as a string or an integer; as a string, only its canonical decimal: no rounding, no '1e3').
-- On a stale token either fails with SQLSTATE 45000, message
--   FENCE stale token T for lock "L": the highest is H
-- (L with each byte outside printable ASCII, quote and backslash as \xNN), and changes nothing:
-- the triggers below refuse to lower a fence, whoever tries. MariaDB does not abort the transaction
-- on an error: the caller must ROLLBACK (a COMMIT would keep what the transaction wrote before
-- the failed statement). docs/guard-in-your-database.md says why this is enough.
-- Creating triggers with binary logging on needs SUPER or log_bin_trust_function_creators=1.

-- The highest token accepted per lock. The name is compared byte for byte (VARBINARY: no
-- case folding, no trailing-space padding, whatever the server's default collation): any bytes
-- but control characters, 1 to 1024 of them, as every fencekit name.
-- To reset a fence (a new lock service that starts again from token 1), DELETE its row.
-- (A table made by an earlier version, with names up to 255 bytes, takes longer ones after
-- ALTER TABLE fencekit_fences MODIFY lock_name VARBINARY(1024) NOT NULL.)
CREATE TABLE IF NOT EXISTS fencekit_fences (
  lock_name VARBINARY(1024) NOT NULL PRIMARY KEY,
  highest BIGINT NOT NULL,
  CONSTRAINT fencekit_fences_highest CHECK (highest >= 1)
) ENGINE=InnoDB;

-- CREATE OR REPLACE: one statement each, under the table's metadata lock, so a reload never
-- leaves a moment without the trigger (a DROP then a CREATE would: the plain statement would
-- then lower a fence unchecked). MySQL has no CREATE OR REPLACE TRIGGER: there, DROP TRIGGER IF
-- EXISTS and CREATE TRIGGER while no writer runs.
DELIMITER //
-- A new fence, and the inserted values of an upsert (which fires this before it finds the
-- duplicate): a NULL or empty lock name, or one with a control character, a NULL token or one
-- below 1 SIGNAL SQLSTATE 22023, MESSAGE_TEXT "FENCEKIT_ARGUMENT: ...". (A name over 1024 bytes
-- fails before, as too long for the column: SQLSTATE 22001 in strict mode, MariaDB's default;
-- outside strict mode it would be cut to 1024 bytes. CALL fencekit_advance refuses it with
-- 22023. The plain statement converts a token given as a string or a decimal to BIGINT before
-- the trigger sees it, rounding 100.5 to 101: give it an integer, or CALL fencekit_advance.)
CREATE OR REPLACE TRIGGER fencekit_fences_arguments BEFORE INSERT ON fencekit_fences FOR EACH ROW
BEGIN
  IF NEW.lock_name IS NULL OR LENGTH(NEW.lock_name) = 0
     OR NEW.lock_name REGEXP '[\\x00-\\x1f\\x7f]' THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT =
      'FENCEKIT_ARGUMENT: the lock name must be 1 to 1024 bytes without control characters';
  END IF;
  IF NEW.highest IS NULL OR NEW.highest < 1 THEN
    SIGNAL SQLSTATE '22023'
      SET MESSAGE_TEXT = 'FENCEKIT_ARGUMENT: the fencing token must be a number >= 1';
  END IF;
END //

-- The guard: a fence is never lowered. An update to a lower token SIGNALs SQLSTATE 45000,
-- MESSAGE_TEXT "FENCE stale token T for lock "L": the highest is H", and the statement changes
-- nothing. An equal token is accepted.
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
  DECLARE v_message VARCHAR(512) CHARACTER SET ascii;
  DECLARE v_shown VARCHAR(4200) CHARACTER SET ascii DEFAULT '';
  DECLARE v_i INT DEFAULT 1;
  DECLARE v_byte INT;
  IF NEW.highest < OLD.highest THEN
    -- The name byte by byte, as ASCII: any bytes (not UTF-8 too) make a message.
    WHILE v_i <= LENGTH(OLD.lock_name) DO
      SET v_byte = ORD(SUBSTRING(OLD.lock_name, v_i, 1));
      IF v_byte < 32 OR v_byte > 126 OR v_byte IN (34, 92) THEN
        SET v_shown = CONCAT(v_shown, '\\x', LOWER(LPAD(HEX(v_byte), 2, '0')));
      ELSE
        SET v_shown = CONCAT(v_shown, CHAR(v_byte USING ascii));
      END IF;
      SET v_i = v_i + 1;
    END WHILE;
    -- MESSAGE_TEXT holds 512 characters (MariaDB 10.2.8 and later): a long name is cut, the
    -- numbers stay.
    SET v_message = CONCAT('FENCE stale token ', NEW.highest, ' for lock "',
                           IF(LENGTH(v_shown) > 400, CONCAT(LEFT(v_shown, 397), '...'), v_shown),
                           '": the highest is ', OLD.highest);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_message;
  END IF;
END //

-- The same advance as a procedure (the form before the plain statement): it checks its
-- arguments itself, whatever their form (SQLSTATE 22023: a name over 1024 bytes, also outside
-- strict mode; a token that is not the canonical decimal of 1..9223372036854775807, given as a
-- string or a number: '007', '1e3', 100.5 and 0x10 are refused, not converted), then upserts.
-- Inside a procedure, a CALL in autocommit mode commits each statement on its own: the fence is
-- still never lowered, but guard writes only inside an explicit transaction.
CREATE OR REPLACE PROCEDURE fencekit_advance(IN p_lock LONGBLOB, IN p_token LONGBLOB)
  MODIFIES SQL DATA
  SQL SECURITY INVOKER
BEGIN
  IF LENGTH(p_lock) > 1024 THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT =
      'FENCEKIT_ARGUMENT: the lock name must be 1 to 1024 bytes without control characters';
  END IF;
  IF p_token IS NULL OR LENGTH(p_token) > 19 OR NOT p_token REGEXP '^[1-9][0-9]*$'
     OR (LENGTH(p_token) = 19 AND p_token > '9223372036854775807') THEN
    SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT =
      'FENCEKIT_ARGUMENT: the fencing token must be an integer in 1..9223372036854775807';
  END IF;
  INSERT INTO fencekit_fences (lock_name, highest) VALUES (p_lock, CAST(p_token AS SIGNED))
    ON DUPLICATE KEY UPDATE highest = VALUES(highest);
END //
DELIMITER ;

--
-- zklock in databases that are not UTF-8
--
-- ZooKeeper's names are UTF-8 (Java strings).  zklock converts a path from
-- the database encoding to UTF-8 before it checks it, and converts paths,
-- node names and node data back to the database encoding on the way out.
-- SQL_ASCII does no conversion, on the way in or out: there a path is the
-- bytes it is made of.  Bytes that are not UTF-8 fail with 22021 (invalid
-- byte sequence for encoding "UTF8"), characters ZooKeeper refuses with
-- 22023, like in any other database, and nothing reaches ZooKeeper.  (This
-- file is ASCII only; non-ASCII text is written with escapes, and compared
-- rather than printed.)
--

-- the regression database, whatever its name (pg_regress's --dbname:
-- contrib_regression under make installcheck), to come back to at the end
\set regress_db :DBNAME

-- from the regression database (UTF8): a barrier named "/enc/cafe" with an
-- e acute, U+00E9
SELECT getdatabaseencoding();
SELECT zk_barrier_set(U&'/enc/caf\00E9');

CREATE DATABASE zklock_ascii ENCODING 'SQL_ASCII' LOCALE 'C' TEMPLATE template0;
CREATE DATABASE zklock_latin1 ENCODING 'LATIN1' LOCALE 'C' TEMPLATE template0;

--
-- SQL_ASCII: paths are bytes, and must be UTF-8
--
\c zklock_ascii
CREATE EXTENSION zklock;
SELECT getdatabaseencoding();

-- the UTF-8 bytes of the same name reach the same node: the barrier is up
SELECT zk_barrier_wait(E'/enc/caf\xc3\xa9', '50ms');

-- a lock under a non-ASCII path; zk_locks gives the same bytes back
SELECT zk_mutex_acquire(E'/enc/lock/caf\xc3\xa9');
SELECT path = E'/enc/lock/caf\xc3\xa9' AS same_bytes, octet_length(path), state
  FROM zk_locks WHERE pid = pg_backend_pid();
SELECT position, kind, holds FROM zk_participants(E'/enc/lock/caf\xc3\xa9');
SELECT zk_mutex_release(E'/enc/lock/caf\xc3\xa9');

-- bytes that are not UTF-8 (22021), and characters ZooKeeper refuses (22023)
\set VERBOSITY sqlstate
SELECT zk_mutex_acquire(E'/enc/caf\xe9');
SELECT zk_mutex_acquire(E'/enc/caf\xc3');
SELECT zk_mutex_acquire(E'/enc/\xed\xa0\x80');
SELECT zk_mutex_acquire(E'/enc/\xc0\xaf');
SELECT zk_barrier_set(E'/enc/\xff');
SELECT zk_semaphore_acquire(E'/enc/\xfe', 1);
SELECT zk_mutex_acquire(E'/enc/a\xc2\x85b');
SELECT zk_mutex_acquire(E'/enc/a\xee\x80\x80b');
SELECT zk_mutex_acquire(E'/enc/a\xef\xbf\xb5b');

-- PostgreSQL itself refuses Unicode escapes above U+007F in a database that
-- is not UTF-8 (0A000), before zklock is called
SELECT zk_mutex_acquire(E'/enc/caf\u00e9');
\set VERBOSITY default

-- nothing was left behind
SELECT count(*) FROM zk_locks WHERE pid = pg_backend_pid();

--
-- LATIN1: paths are converted to UTF-8 and back
--
\c zklock_latin1
CREATE EXTENSION zklock;
SELECT getdatabaseencoding();

-- LATIN1's e acute (byte 0xE9) becomes U+00E9: the same barrier
SELECT zk_barrier_wait('/enc/caf' || chr(233), '50ms');
SELECT zk_mutex_acquire('/enc/lock/caf' || chr(233));
SELECT path = '/enc/lock/caf' || chr(233) AS converted_back, octet_length(path), state
  FROM zk_locks WHERE pid = pg_backend_pid();
SELECT zk_mutex_release('/enc/lock/caf' || chr(233));

-- U+0085 exists in LATIN1 (byte 0x85), but ZooKeeper refuses it (22023)
\set VERBOSITY sqlstate
SELECT zk_mutex_acquire('/enc/a' || chr(133) || 'b');
\set VERBOSITY default
SELECT count(*) FROM zk_locks WHERE pid = pg_backend_pid();

--
-- back in the UTF8 database: take the barrier down, drop the databases
--
\c :regress_db
SELECT zk_barrier_wait(U&'/enc/caf\00E9', '50ms');
SELECT zk_barrier_remove(U&'/enc/caf\00E9');
SELECT zk_barrier_wait(U&'/enc/caf\00E9', '50ms');
DROP DATABASE zklock_ascii WITH (FORCE);
DROP DATABASE zklock_latin1 WITH (FORCE);

/* zklock--0.5--0.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '0.6'" to load this file. \quit

-- issue 44 (6): try forms, and timeouts in milliseconds
--
-- The try forms (and their _xact forms) of the read lock, the write lock,
-- the semaphore and the semaphore mutex, and the mutex's try _xact form:
-- one round, no wait, as zk_mutex_try_acquire.  Every function taking a
-- timeout interval also takes it as integer milliseconds (as lock_timeout)
-- and as text read as an interval: a quoted literal such as '10 s' (or a
-- parameter of unknown type, or NULL) resolves to the text form, which
-- keeps it from being ambiguous between interval and integer.  The
-- overloads are the same C functions, which read the timeout by the
-- type the called function declares (backend/args.c).

CREATE FUNCTION zk_mutex_try_acquire_xact(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_mutex_try_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_try_acquire_xact(text) IS
'take the ZooKeeper mutex at path until the end of the transaction if it is free, without waiting';

CREATE FUNCTION zk_read_lock_try_acquire(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_try_acquire(text) IS
'take the read side of the ZooKeeper read/write lock at path for this session if no writer is ahead, without waiting';

CREATE FUNCTION zk_read_lock_try_acquire_xact(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_try_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_try_acquire_xact(text) IS
'take the read side of the ZooKeeper read/write lock at path until the end of the transaction if no writer is ahead, without waiting';

CREATE FUNCTION zk_write_lock_try_acquire(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_try_acquire(text) IS
'take the write side of the ZooKeeper read/write lock at path for this session if it is free, without waiting';

CREATE FUNCTION zk_write_lock_try_acquire_xact(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_try_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_try_acquire_xact(text) IS
'take the write side of the ZooKeeper read/write lock at path until the end of the transaction if it is free, without waiting';

CREATE FUNCTION zk_semaphore_mutex_try_acquire(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_try_acquire(text) IS
'take the non-reentrant ZooKeeper mutex at path for this session if it is free, without waiting';

CREATE FUNCTION zk_semaphore_mutex_try_acquire_xact(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_try_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_try_acquire_xact(text) IS
'take the non-reentrant ZooKeeper mutex at path until the end of the transaction if it is free, without waiting';

CREATE FUNCTION zk_semaphore_try_acquire(path text, max_leases integer, qty integer DEFAULT 1)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_try_acquire(text, integer, integer) IS
'take qty leases of the ZooKeeper semaphore at path of max_leases for this session if they are free, without waiting; the lease node names, NULL when they are not';

CREATE FUNCTION zk_semaphore_try_acquire_xact(path text, max_leases integer, qty integer DEFAULT 1)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_try_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_try_acquire_xact(text, integer, integer) IS
'take qty leases of the ZooKeeper semaphore at path until the end of the transaction if they are free, without waiting; NULL when they are not';

CREATE FUNCTION zk_mutex_acquire(path text, timeout integer, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_mutex_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_acquire(text, integer, boolean) IS
'zk_mutex_acquire(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_mutex_acquire(path text, timeout text, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_mutex_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_acquire(text, text, boolean) IS
'zk_mutex_acquire(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_mutex_acquire_xact(path text, timeout integer, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_mutex_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_acquire_xact(text, integer, boolean) IS
'zk_mutex_acquire_xact(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_mutex_acquire_xact(path text, timeout text, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_mutex_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_acquire_xact(text, text, boolean) IS
'zk_mutex_acquire_xact(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_read_lock_acquire(path text, timeout integer, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_acquire(text, integer, boolean) IS
'zk_read_lock_acquire(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_read_lock_acquire(path text, timeout text, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_acquire(text, text, boolean) IS
'zk_read_lock_acquire(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_read_lock_acquire_xact(path text, timeout integer, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_acquire_xact(text, integer, boolean) IS
'zk_read_lock_acquire_xact(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_read_lock_acquire_xact(path text, timeout text, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_acquire_xact(text, text, boolean) IS
'zk_read_lock_acquire_xact(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_write_lock_acquire(path text, timeout integer, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_acquire(text, integer, boolean) IS
'zk_write_lock_acquire(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_write_lock_acquire(path text, timeout text, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_acquire(text, text, boolean) IS
'zk_write_lock_acquire(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_write_lock_acquire_xact(path text, timeout integer, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_acquire_xact(text, integer, boolean) IS
'zk_write_lock_acquire_xact(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_write_lock_acquire_xact(path text, timeout text, revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_acquire_xact(text, text, boolean) IS
'zk_write_lock_acquire_xact(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_semaphore_mutex_acquire(path text, timeout integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_acquire(text, integer) IS
'zk_semaphore_mutex_acquire(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_semaphore_mutex_acquire(path text, timeout text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_acquire(text, text) IS
'zk_semaphore_mutex_acquire(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_semaphore_mutex_acquire_xact(path text, timeout integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_acquire_xact(text, integer) IS
'zk_semaphore_mutex_acquire_xact(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_semaphore_mutex_acquire_xact(path text, timeout text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_acquire_xact(text, text) IS
'zk_semaphore_mutex_acquire_xact(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_multi_lock_acquire(paths text[], timeout integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_multi_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_multi_lock_acquire(text[], integer) IS
'zk_multi_lock_acquire(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_multi_lock_acquire(paths text[], timeout text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_multi_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_multi_lock_acquire(text[], text) IS
'zk_multi_lock_acquire(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_semaphore_acquire(path text, max_leases integer, qty integer, timeout integer)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_acquire(text, integer, integer, integer) IS
'zk_semaphore_acquire(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_semaphore_acquire(path text, max_leases integer, qty integer, timeout text)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_acquire(text, integer, integer, text) IS
'zk_semaphore_acquire(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_semaphore_acquire_xact(path text, max_leases integer, qty integer, timeout integer)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_acquire_xact(text, integer, integer, integer) IS
'zk_semaphore_acquire_xact(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_semaphore_acquire_xact(path text, max_leases integer, qty integer, timeout text)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_acquire_xact(text, integer, integer, text) IS
'zk_semaphore_acquire_xact(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_barrier_wait(path text, timeout integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_barrier_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_barrier_wait(text, integer) IS
'zk_barrier_wait(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_barrier_wait(path text, timeout text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_barrier_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_barrier_wait(text, text) IS
'zk_barrier_wait(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_double_barrier_enter(path text, member_qty integer, timeout integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_double_barrier_enter'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_double_barrier_enter(text, integer, integer) IS
'zk_double_barrier_enter(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_double_barrier_enter(path text, member_qty integer, timeout text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_double_barrier_enter'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_double_barrier_enter(text, integer, text) IS
'zk_double_barrier_enter(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_double_barrier_leave(path text, timeout integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_double_barrier_leave'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_double_barrier_leave(text, integer) IS
'zk_double_barrier_leave(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_double_barrier_leave(path text, timeout text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_double_barrier_leave'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_double_barrier_leave(text, text) IS
'zk_double_barrier_leave(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

CREATE FUNCTION zk_leader_await(path text, timeout integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_leader_await(text, integer) IS
'zk_leader_await(..., interval) with the timeout in milliseconds (as lock_timeout)';

CREATE FUNCTION zk_leader_await(path text, timeout text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_leader_await(text, text) IS
'zk_leader_await(..., interval) with the timeout as text read as an interval (what a quoted literal resolves to)';

-- the new functions' privileges, as every function's above (the same
-- loop, run again: it changes nothing on the others)
DO $$
DECLARE
	f regprocedure;
BEGIN
	FOR f IN
		SELECT p.oid::regprocedure
		  FROM pg_proc p
		  JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
		                  AND d.refclassid = 'pg_extension'::regclass
		                  AND d.deptype = 'e'
		  JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'zklock'
		 WHERE p.pronamespace = '@extschema@'::regnamespace
		   AND p.proname LIKE 'zk\_%'
		   AND p.proname NOT IN ('zk_status', 'zk_locks', 'zk_lock_token',
		                         'zk_revocation_requested')
	LOOP
		EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
		EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO zklock_user', f);
	END LOOP;
END
$$;

-- issue 44 (3): zk_locks shows the database, the role and the pids each
-- wait is behind (datid, datname, usesysid, usename, blocking_pids);
-- zk_blocking_pids(); the worker's counters as a pg_stat_*-shaped view
-- with its reset.  zk_locks is dropped and created again (its OUT columns
-- cannot change in place), under the symbol zk_locks_0_6, which only a
-- library of 0.6 or later has: run by a server still on an older library,
-- this update fails ("could not find function"); restart the server on
-- the new library first.  The library of 0.6 also serves the zk_locks of
-- earlier versions under their symbols (their columns are a prefix).

DROP VIEW zk_locks;
DROP FUNCTION zk_locks();

CREATE FUNCTION zk_locks(
    OUT pid integer,
    OUT recipe text,
    OUT path text,
    OUT node text,
    OUT mode text,
    OUT scope text,
    OUT count integer,
    OUT state text,
    OUT since timestamptz,
    OUT token bigint,
    OUT revocation_requested boolean,
    OUT waiting_for text,
    OUT waits_for text,
    OUT datid oid,
    OUT datname name,
    OUT usesysid oid,
    OUT usename name,
    OUT blocking_pids integer[])
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_locks_0_6'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_locks() IS
'every zklock lock held or waited for in this cluster, as the zk_locks view shows it';

CREATE VIEW zk_locks AS SELECT * FROM zk_locks();
GRANT SELECT ON zk_locks TO PUBLIC;

COMMENT ON VIEW zk_locks IS
'every zklock lock held or waited for in this cluster';

-- issue 44 (3): zk_blocking_pids(), and the worker's counters as a
-- pg_stat_*-shaped view with its reset (zk_locks' columns datid, datname,
-- usesysid, usename and blocking_pids are in its definition above)

CREATE FUNCTION zk_blocking_pids(pid integer)
RETURNS integer[] AS 'MODULE_PATHNAME', 'zk_blocking_pids'
LANGUAGE C STRICT VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_blocking_pids(integer) IS
'pids of the sessions of this cluster that hold or are queued ahead for the zklock lock pid waits for (as pg_blocking_pids)';

CREATE FUNCTION zk_stat_worker(
    OUT connected_count bigint,
    OUT suspended_count bigint,
    OUT expired_count bigint,
    OUT locks_lost bigint,
    OUT leases_expired bigint,
    OUT handovers bigint,
    OUT read_joins bigint,
    OUT listings_skipped bigint,
    OUT batches bigint,
    OUT batched_deletes bigint,
    OUT batched_creates bigint,
    OUT batches_failed bigint,
    OUT cache_grants bigint,
    OUT connection_attempts bigint,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'zk_stat_worker'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_stat_worker() IS
'the zklock worker''s counters since stats_reset, as the zk_stat_worker view shows them';

CREATE VIEW zk_stat_worker AS SELECT * FROM zk_stat_worker();
GRANT SELECT ON zk_stat_worker TO PUBLIC;

COMMENT ON VIEW zk_stat_worker IS
'the zklock worker''s counters since stats_reset (zk_stat_reset)';

CREATE FUNCTION zk_stat_reset()
RETURNS void AS 'MODULE_PATHNAME', 'zk_stat_reset'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_stat_reset() IS
'start the counters of zk_stat_worker again from zero (superuser, or granted EXECUTE)';

-- zk_blocking_pids() and zk_stat_worker() stay readable by everyone, as
-- zk_locks and zk_status() do; the reset is a superuser's, as
-- pg_stat_reset_shared() is, who may grant it.
REVOKE ALL ON FUNCTION zk_stat_reset() FROM PUBLIC;

-- issue 44 (1): zk_status() shows the session timeout the worker's handle
-- asked for (session_timeout_asked, beside the negotiated session_timeout)
-- and a zklock.session_timeout set since, which takes effect at its next
-- handle (pending).  As in 0.4 to 0.5, the function is dropped and
-- created again, under the symbol zk_status_0_6, which only a library of
-- 0.6 or later has: restart the server on the new library first.

DROP FUNCTION zk_status();

CREATE FUNCTION zk_status(
    OUT state text,
    OUT session_id text,
    OUT server text,
    OUT session_timeout integer,
    OUT requests_queued integer,
    OUT locks_held integer,
    OUT worker_pid integer,
    OUT state_since timestamptz,
    OUT slots_used integer,
    OUT connected_count bigint,
    OUT suspended_count bigint,
    OUT expired_count bigint,
    OUT lease_until timestamptz,
    OUT lease_remaining interval,
    OUT locks_lost bigint,
    OUT leases_expired bigint,
    OUT deletes_pending bigint,
    OUT handovers bigint,
    OUT read_joins bigint,
    OUT server_mode text,
    OUT listings_skipped bigint,
    OUT batches bigint,
    OUT batched_deletes bigint,
    OUT batched_creates bigint,
    OUT batches_failed bigint,
    OUT tls boolean,
    OUT sasl_identity text,
    OUT connection_failure text,
    OUT tls_cert_expires timestamptz,
    OUT tls_server_cert_expires timestamptz,
    OUT tls_warning text,
    OUT session_timeout_asked integer,
    OUT pending text)
RETURNS record
AS 'MODULE_PATHNAME', 'zk_status_0_6'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION zk_status() IS
'state of the ZooKeeper session of this cluster''s zklock worker';

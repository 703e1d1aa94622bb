/* zklock--0.6.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION zklock" to load this file. \quit

-- Reentrant mutex (Curator's InterProcessMutex)

CREATE FUNCTION zk_mutex_acquire(path text, timeout interval DEFAULT NULL,
                                 revocable boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_mutex_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_acquire(text, interval, boolean) IS
'take the ZooKeeper mutex at path for this session; false when the timeout passed first';

CREATE FUNCTION zk_mutex_try_acquire(path text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_mutex_try_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_try_acquire(text) IS
'take the ZooKeeper mutex at path if it is free, without waiting';

CREATE FUNCTION zk_mutex_acquire_xact(path text, timeout interval DEFAULT NULL,
                                      revocable boolean DEFAULT false)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_mutex_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_acquire_xact(text, interval, boolean) IS
'take the ZooKeeper mutex at path until the end of the transaction';

CREATE FUNCTION zk_mutex_release(path text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'zk_mutex_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_mutex_release(text) IS
'release one session-level hold of the ZooKeeper mutex at path';

CREATE FUNCTION zk_release_all()
RETURNS integer
AS 'MODULE_PATHNAME', 'zk_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_release_all() IS
'release every session-level zklock lock of this session';

-- Read/write lock (Curator's InterProcessReadWriteLock)

CREATE FUNCTION zk_read_lock_acquire(path text, timeout interval DEFAULT NULL,
                                     revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_acquire(text, interval, boolean) IS
'take the shared (read) side of the ZooKeeper read/write lock at path for this session (Curator''s InterProcessReadWriteLock); false when the timeout passed first';

CREATE FUNCTION zk_read_lock_acquire_xact(path text, timeout interval DEFAULT NULL,
                                          revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_acquire_xact(text, interval, boolean) IS
'take the read side of the ZooKeeper read/write lock at path until the end of the transaction';

CREATE FUNCTION zk_read_lock_release(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_read_lock_release(text) IS
'release one session-level hold of the read side of the ZooKeeper read/write lock at path';

CREATE FUNCTION zk_write_lock_acquire(path text, timeout interval DEFAULT NULL,
                                      revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_acquire(text, interval, boolean) IS
'take the exclusive (write) side of the ZooKeeper read/write lock at path for this session; false when the timeout passed first';

CREATE FUNCTION zk_write_lock_acquire_xact(path text, timeout interval DEFAULT NULL,
                                           revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_acquire_xact(text, interval, boolean) IS
'take the write side of the ZooKeeper read/write lock at path until the end of the transaction';

CREATE FUNCTION zk_write_lock_release(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_write_lock_release(text) IS
'release one session-level hold of the write side of the ZooKeeper read/write lock at path';

-- Non-reentrant mutex (Curator's InterProcessSemaphoreMutex)

CREATE FUNCTION zk_semaphore_mutex_acquire(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_acquire(text, interval) IS
'take the non-reentrant ZooKeeper mutex at path for this session (Curator''s InterProcessSemaphoreMutex); false when the timeout passed first';

CREATE FUNCTION zk_semaphore_mutex_acquire_xact(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_acquire_xact(text, interval) IS
'take the non-reentrant ZooKeeper mutex at path until the end of the transaction';

CREATE FUNCTION zk_semaphore_mutex_release(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_mutex_release(text) IS
'release the session-level hold of the non-reentrant ZooKeeper mutex at path';

-- Multi-lock (Curator's InterProcessMultiLock over mutexes)

CREATE FUNCTION zk_multi_lock_acquire(paths text[], timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_multi_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_multi_lock_acquire(text[], interval) IS
'take the ZooKeeper mutexes at paths in order, all or none, for this session (Curator''s InterProcessMultiLock); false when the timeout passed first';

CREATE FUNCTION zk_multi_lock_release(paths text[])
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_multi_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_multi_lock_release(text[]) IS
'release one session-level hold of each ZooKeeper mutex at paths, in reverse order';

-- Counting semaphore with leases (Curator's InterProcessSemaphoreV2)

CREATE FUNCTION zk_semaphore_acquire(path text, max_leases integer, qty integer DEFAULT 1,
                                     timeout interval DEFAULT NULL)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_acquire(text, integer, integer, interval) IS
'take qty leases of the ZooKeeper semaphore at path of max_leases for this session (Curator''s InterProcessSemaphoreV2); the lease node names, NULL when the timeout passed first';

CREATE FUNCTION zk_semaphore_acquire_xact(path text, max_leases integer, qty integer DEFAULT 1,
                                          timeout interval DEFAULT NULL)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_acquire_xact(text, integer, integer, interval) IS
'take qty leases of the ZooKeeper semaphore at path until the end of the transaction; NULL when the timeout passed first';

CREATE FUNCTION zk_semaphore_release(path text, lease text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_release(text, text) IS
'return one session-level lease, named by its node, of the ZooKeeper semaphore at path';

CREATE FUNCTION zk_semaphore_release_all(path text)
RETURNS integer AS 'MODULE_PATHNAME', 'zk_semaphore_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_semaphore_release_all(text) IS
'return every session-level lease of the ZooKeeper semaphore at path; how many were returned';

-- Barrier and double barrier (Curator's DistributedBarrier, DistributedDoubleBarrier)

CREATE FUNCTION zk_barrier_set(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_barrier_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_barrier_set(text) IS
'set the ZooKeeper barrier at path (Curator''s DistributedBarrier); true when this call created it';

CREATE FUNCTION zk_barrier_remove(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_barrier_remove'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_barrier_remove(text) IS
'remove the ZooKeeper barrier at path; true when this call removed it';

CREATE FUNCTION zk_barrier_wait(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_barrier_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_barrier_wait(text, interval) IS
'wait until the ZooKeeper barrier at path is removed; false when the timeout passed first';

CREATE FUNCTION zk_double_barrier_enter(path text, member_qty integer,
                                        timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_double_barrier_enter'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_double_barrier_enter(text, integer, interval) IS
'enter the ZooKeeper double barrier at path and wait until member_qty members are in (Curator''s DistributedDoubleBarrier); false when the timeout passed first';

CREATE FUNCTION zk_double_barrier_leave(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_double_barrier_leave'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_double_barrier_leave(text, interval) IS
'leave the ZooKeeper double barrier at path and wait until every member has left; false when the timeout passed first';

-- Revocation (Curator's Revoker / Revocable)

CREATE FUNCTION zk_revoke(path text)
RETURNS integer AS 'MODULE_PATHNAME', 'zk_revoke'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_revoke(text) IS
'ask every holder of the mutex or read/write lock at path to release it (Curator''s Revoker.attemptRevoke); how many were asked';

CREATE FUNCTION zk_revocation_requested()
RETURNS SETOF text AS 'MODULE_PATHNAME', 'zk_revocation_requested'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_revocation_requested() IS
'paths of this session''s revocable locks whose holder was asked to release them';

-- Shared counters (Curator's SharedCount, DistributedAtomicLong)

CREATE FUNCTION zk_shared_count_get(path text, seed integer DEFAULT 0)
RETURNS integer AS 'MODULE_PATHNAME', 'zk_shared_count_get'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_shared_count_get(text, integer) IS
'value of the ZooKeeper shared count at path (Curator''s SharedCount), created holding seed when missing';

CREATE FUNCTION zk_shared_count_get_versioned(path text, seed integer DEFAULT 0,
    OUT value integer, OUT version integer)
RETURNS record AS 'MODULE_PATHNAME', 'zk_shared_count_get_versioned'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_shared_count_get_versioned(text, integer) IS
'value and version of the ZooKeeper shared count at path, created holding seed when missing';

CREATE FUNCTION zk_shared_count_set(path text, value integer)
RETURNS void AS 'MODULE_PATHNAME', 'zk_shared_count_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_shared_count_set(text, integer) IS
'write value into the ZooKeeper shared count at path';

CREATE FUNCTION zk_shared_count_try_set(path text, value integer, version integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_shared_count_try_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_shared_count_try_set(text, integer, integer) IS
'write value into the ZooKeeper shared count at path only if it is still at version; false when anyone wrote since';

CREATE FUNCTION zk_atomic_long_get(path text)
RETURNS bigint AS 'MODULE_PATHNAME', 'zk_atomic_long_get'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_atomic_long_get(text) IS
'value of the ZooKeeper atomic long at path (Curator''s DistributedAtomicLong); 0 when missing';

CREATE FUNCTION zk_atomic_long_add(path text, delta bigint)
RETURNS bigint AS 'MODULE_PATHNAME', 'zk_atomic_long_add'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_atomic_long_add(text, bigint) IS
'add delta to the ZooKeeper atomic long at path, atomically; the new value';

CREATE FUNCTION zk_atomic_long_compare_and_set(path text, expected bigint, new_value bigint)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_atomic_long_compare_and_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_atomic_long_compare_and_set(text, bigint, bigint) IS
'write new_value into the ZooKeeper atomic long at path only if it holds expected; false otherwise';

CREATE FUNCTION zk_atomic_long_set(path text, value bigint)
RETURNS void AS 'MODULE_PATHNAME', 'zk_atomic_long_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_atomic_long_set(text, bigint) IS
'write value into the ZooKeeper atomic long at path, whatever it holds (Curator''s forceSet)';

-- Participants and fencing tokens

CREATE FUNCTION zk_participants(path text,
    OUT "position" integer, OUT node text, OUT kind text, OUT data text, OUT holds boolean)
RETURNS SETOF record AS 'MODULE_PATHNAME', 'zk_participants'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_participants(text) IS
'nodes of the recipe at path in queue order, with their data and which of them hold (Curator''s getParticipantNodes)';

CREATE FUNCTION zk_lock_token(path text)
RETURNS bigint AS 'MODULE_PATHNAME', 'zk_lock_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_lock_token(text) IS
'fencing token of the lock this session holds at path: its node''s creation zxid';

-- Introspection

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

-- Leader election (Curator's LeaderLatch)

CREATE FUNCTION zk_leader_join(path text, id text DEFAULT NULL,
    scope text DEFAULT 'session')
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_join'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_leader_join(text, text, text) IS
'join the leader election at path as id, for this session or the whole cluster (Curator''s LeaderLatch.start)';

CREATE FUNCTION zk_leader_leave(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_leave'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_leader_leave(text) IS
'leave the leader election at path (Curator''s LeaderLatch.close)';

CREATE FUNCTION zk_has_leadership(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_has_leadership'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_has_leadership(text) IS
'whether our member of the leader election at path leads, with proof (Curator''s LeaderLatch.hasLeadership)';

CREATE FUNCTION zk_leader_await(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_leader_await(text, interval) IS
'wait until our member of the leader election at path leads (Curator''s LeaderLatch.await); false when the timeout passed first';

CREATE FUNCTION zk_leader_xact(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_leader_xact(text) IS
'whether our member of the leader election at path leads; when true, COMMIT fails if that leadership ended first';

-- The leader's id as Curator's getLeader() names it: the first
-- participant whose data could be read; NULL when there is none.
-- zk_participants is named with the extension's schema, so that the
-- function works whatever the caller's search_path (0.1 left it unqualified).
CREATE FUNCTION zk_leader(path text)
RETURNS text AS $$
    SELECT coalesce(p.data, '') FROM @extschema@.zk_participants(path) p
    WHERE p.kind = 'latch' AND p.holds
    ORDER BY p."position" LIMIT 1
$$ LANGUAGE sql VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION zk_leader(text) IS
'id of the leader of the election at path (Curator''s LeaderLatch.getLeader); NULL when there is no member';

-- Privileges.  Everything that changes shared state (takes or releases a
-- lock, writes into ZooKeeper) or reads ZooKeeper is not for PUBLIC: grant
-- the role zklock_user to the roles that coordinate through zklock.
-- zk_status(), zk_locks, zk_lock_token() and zk_revocation_requested()
-- stay open: they only show this cluster's own state.  Only the
-- extension's own functions are touched (0.1 also took PUBLIC's EXECUTE
-- from any zk_ function that was already in the schema).  A later version
-- that adds a function grants it in its update script as here.
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'zklock_user') THEN
		CREATE ROLE zklock_user NOLOGIN;
	END IF;
END
$$;

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

/* zklock--0.1.sql */

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

CREATE FUNCTION zk_read_lock_acquire_xact(path text, timeout interval DEFAULT NULL,
                                          revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_read_lock_release(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_read_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_write_lock_acquire(path text, timeout interval DEFAULT NULL,
                                      revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_write_lock_acquire_xact(path text, timeout interval DEFAULT NULL,
                                           revocable boolean DEFAULT false)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_write_lock_release(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_write_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Non-reentrant mutex (Curator's InterProcessSemaphoreMutex)

CREATE FUNCTION zk_semaphore_mutex_acquire(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_semaphore_mutex_acquire_xact(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_semaphore_mutex_release(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_mutex_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Multi-lock (Curator's InterProcessMultiLock over mutexes)

CREATE FUNCTION zk_multi_lock_acquire(paths text[], timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_multi_lock_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_multi_lock_release(paths text[])
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_multi_lock_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Counting semaphore with leases (Curator's InterProcessSemaphoreV2)

CREATE FUNCTION zk_semaphore_acquire(path text, max_leases integer, qty integer DEFAULT 1,
                                     timeout interval DEFAULT NULL)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_acquire'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_semaphore_acquire_xact(path text, max_leases integer, qty integer DEFAULT 1,
                                          timeout interval DEFAULT NULL)
RETURNS text[] AS 'MODULE_PATHNAME', 'zk_semaphore_acquire_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_semaphore_release(path text, lease text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_semaphore_release'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_semaphore_release_all(path text)
RETURNS integer AS 'MODULE_PATHNAME', 'zk_semaphore_release_all'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Barrier and double barrier (Curator's DistributedBarrier, DistributedDoubleBarrier)

CREATE FUNCTION zk_barrier_set(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_barrier_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_barrier_remove(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_barrier_remove'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_barrier_wait(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_barrier_wait'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_double_barrier_enter(path text, member_qty integer,
                                        timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_double_barrier_enter'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_double_barrier_leave(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_double_barrier_leave'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Revocation (Curator's Revoker / Revocable)

CREATE FUNCTION zk_revoke(path text)
RETURNS integer AS 'MODULE_PATHNAME', 'zk_revoke'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_revocation_requested()
RETURNS SETOF text AS 'MODULE_PATHNAME', 'zk_revocation_requested'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Shared counters (Curator's SharedCount, DistributedAtomicLong)

CREATE FUNCTION zk_shared_count_get(path text, seed integer DEFAULT 0)
RETURNS integer AS 'MODULE_PATHNAME', 'zk_shared_count_get'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_shared_count_get_versioned(path text, seed integer DEFAULT 0,
    OUT value integer, OUT version integer)
RETURNS record AS 'MODULE_PATHNAME', 'zk_shared_count_get_versioned'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_shared_count_set(path text, value integer)
RETURNS void AS 'MODULE_PATHNAME', 'zk_shared_count_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_shared_count_try_set(path text, value integer, version integer)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_shared_count_try_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_atomic_long_get(path text)
RETURNS bigint AS 'MODULE_PATHNAME', 'zk_atomic_long_get'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_atomic_long_add(path text, delta bigint)
RETURNS bigint AS 'MODULE_PATHNAME', 'zk_atomic_long_add'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_atomic_long_compare_and_set(path text, expected bigint, new_value bigint)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_atomic_long_compare_and_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_atomic_long_set(path text, value bigint)
RETURNS void AS 'MODULE_PATHNAME', 'zk_atomic_long_set'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- Participants and fencing tokens

CREATE FUNCTION zk_participants(path text,
    OUT "position" integer, OUT node text, OUT kind text, OUT data text, OUT holds boolean)
RETURNS SETOF record AS 'MODULE_PATHNAME', 'zk_participants'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_lock_token(path text)
RETURNS bigint AS 'MODULE_PATHNAME', 'zk_lock_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

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
    OUT batches_failed bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'zk_status'
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
    OUT waiting_for text)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'zk_locks'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW zk_locks AS SELECT * FROM zk_locks();
GRANT SELECT ON zk_locks TO PUBLIC;

COMMENT ON VIEW zk_locks IS
'every zklock lock held or waited for in this cluster';

-- Leader election (Curator's LeaderLatch)

CREATE FUNCTION zk_leader_join(path text, id text DEFAULT NULL,
    scope text DEFAULT 'session')
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_join'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_leader_leave(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_leave'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_has_leadership(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_has_leadership'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_leader_await(path text, timeout interval DEFAULT NULL)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_await'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION zk_leader_xact(path text)
RETURNS boolean AS 'MODULE_PATHNAME', 'zk_leader_xact'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

-- The leader's id as Curator's getLeader() names it: the first
-- participant whose data could be read; NULL when there is none.
CREATE FUNCTION zk_leader(path text)
RETURNS text AS $$
    SELECT coalesce(p.data, '') FROM zk_participants(path) p
    WHERE p.kind = 'latch' AND p.holds
    ORDER BY p."position" LIMIT 1
$$ LANGUAGE sql VOLATILE PARALLEL UNSAFE;

-- Privileges.  Everything that changes shared state (takes or releases a
-- lock, writes into ZooKeeper) or reads ZooKeeper is not for PUBLIC: grant
-- the role zklock_user to the roles that coordinate through zklock.
-- zk_status(), zk_locks, zk_lock_token() and zk_revocation_requested()
-- stay open: they only show this cluster's own state.
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


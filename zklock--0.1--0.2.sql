/* zklock--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION zklock UPDATE TO '0.2'" to load this file. \quit

-- 0.2 changes the catalog only; the C library is the same for both
-- versions and every symbol 0.1 names stays.  After this script an
-- updated database has exactly the objects, privileges and descriptions
-- of a fresh CREATE EXTENSION zklock VERSION '0.2' (test/t/230_upgrade.pl
-- compares them).  No function is added or dropped, so the privileges
-- 0.1 set (EXECUTE revoked from PUBLIC, granted to zklock_user) stay as
-- they are: CREATE OR REPLACE FUNCTION keeps a function's ACL.  (0.2's
-- full script grants on the extension's own functions only, where 0.1's
-- took PUBLIC's EXECUTE from any zk_ function of the schema; what 0.1 did
-- to a user's function cannot be told from a DBA's later change, so this
-- script leaves it; doc/operations.md says so.)

-- zk_leader named zk_participants without a schema, so it failed (or
-- could find another function of that name) when the extension's schema
-- was not on the caller's search_path.

CREATE OR REPLACE FUNCTION zk_leader(path text)
RETURNS text AS $$
    SELECT coalesce(p.data, '') FROM @extschema@.zk_participants(path) p
    WHERE p.kind = 'latch' AND p.holds
    ORDER BY p."position" LIMIT 1
$$ LANGUAGE sql VOLATILE PARALLEL UNSAFE;

-- A one-line description of every function that had none.

COMMENT ON FUNCTION zk_read_lock_acquire(text, interval, boolean) IS
'take the shared (read) side of the ZooKeeper read/write lock at path for this session (Curator''s InterProcessReadWriteLock); false when the timeout passed first';

COMMENT ON FUNCTION zk_read_lock_acquire_xact(text, interval, boolean) IS
'take the read side of the ZooKeeper read/write lock at path until the end of the transaction';

COMMENT ON FUNCTION zk_read_lock_release(text) IS
'release one session-level hold of the read side of the ZooKeeper read/write lock at path';

COMMENT ON FUNCTION zk_write_lock_acquire(text, interval, boolean) IS
'take the exclusive (write) side of the ZooKeeper read/write lock at path for this session; false when the timeout passed first';

COMMENT ON FUNCTION zk_write_lock_acquire_xact(text, interval, boolean) IS
'take the write side of the ZooKeeper read/write lock at path until the end of the transaction';

COMMENT ON FUNCTION zk_write_lock_release(text) IS
'release one session-level hold of the write side of the ZooKeeper read/write lock at path';

COMMENT ON FUNCTION zk_semaphore_mutex_acquire(text, interval) IS
'take the non-reentrant ZooKeeper mutex at path for this session (Curator''s InterProcessSemaphoreMutex); false when the timeout passed first';

COMMENT ON FUNCTION zk_semaphore_mutex_acquire_xact(text, interval) IS
'take the non-reentrant ZooKeeper mutex at path until the end of the transaction';

COMMENT ON FUNCTION zk_semaphore_mutex_release(text) IS
'release the session-level hold of the non-reentrant ZooKeeper mutex at path';

COMMENT ON FUNCTION zk_multi_lock_acquire(text[], interval) IS
'take the ZooKeeper mutexes at paths in order, all or none, for this session (Curator''s InterProcessMultiLock); false when the timeout passed first';

COMMENT ON FUNCTION zk_multi_lock_release(text[]) IS
'release one session-level hold of each ZooKeeper mutex at paths, in reverse order';

COMMENT ON FUNCTION zk_semaphore_acquire(text, integer, integer, interval) IS
'take qty leases of the ZooKeeper semaphore at path of max_leases for this session (Curator''s InterProcessSemaphoreV2); the lease node names, NULL when the timeout passed first';

COMMENT ON FUNCTION zk_semaphore_acquire_xact(text, integer, integer, interval) IS
'take qty leases of the ZooKeeper semaphore at path until the end of the transaction; NULL when the timeout passed first';

COMMENT ON FUNCTION zk_semaphore_release(text, text) IS
'return one session-level lease, named by its node, of the ZooKeeper semaphore at path';

COMMENT ON FUNCTION zk_semaphore_release_all(text) IS
'return every session-level lease of the ZooKeeper semaphore at path; how many were returned';

COMMENT ON FUNCTION zk_barrier_set(text) IS
'set the ZooKeeper barrier at path (Curator''s DistributedBarrier); true when this call created it';

COMMENT ON FUNCTION zk_barrier_remove(text) IS
'remove the ZooKeeper barrier at path; true when this call removed it';

COMMENT ON FUNCTION zk_barrier_wait(text, interval) IS
'wait until the ZooKeeper barrier at path is removed; false when the timeout passed first';

COMMENT ON FUNCTION zk_double_barrier_enter(text, integer, interval) IS
'enter the ZooKeeper double barrier at path and wait until member_qty members are in (Curator''s DistributedDoubleBarrier); false when the timeout passed first';

COMMENT ON FUNCTION zk_double_barrier_leave(text, interval) IS
'leave the ZooKeeper double barrier at path and wait until every member has left; false when the timeout passed first';

COMMENT ON FUNCTION zk_revoke(text) IS
'ask every holder of the mutex or read/write lock at path to release it (Curator''s Revoker.attemptRevoke); how many were asked';

COMMENT ON FUNCTION zk_revocation_requested() IS
'paths of this session''s revocable locks whose holder was asked to release them';

COMMENT ON FUNCTION zk_shared_count_get(text, integer) IS
'value of the ZooKeeper shared count at path (Curator''s SharedCount), created holding seed when missing';

COMMENT ON FUNCTION zk_shared_count_get_versioned(text, integer) IS
'value and version of the ZooKeeper shared count at path, created holding seed when missing';

COMMENT ON FUNCTION zk_shared_count_set(text, integer) IS
'write value into the ZooKeeper shared count at path';

COMMENT ON FUNCTION zk_shared_count_try_set(text, integer, integer) IS
'write value into the ZooKeeper shared count at path only if it is still at version; false when anyone wrote since';

COMMENT ON FUNCTION zk_atomic_long_get(text) IS
'value of the ZooKeeper atomic long at path (Curator''s DistributedAtomicLong); 0 when missing';

COMMENT ON FUNCTION zk_atomic_long_add(text, bigint) IS
'add delta to the ZooKeeper atomic long at path, atomically; the new value';

COMMENT ON FUNCTION zk_atomic_long_compare_and_set(text, bigint, bigint) IS
'write new_value into the ZooKeeper atomic long at path only if it holds expected; false otherwise';

COMMENT ON FUNCTION zk_atomic_long_set(text, bigint) IS
'write value into the ZooKeeper atomic long at path, whatever it holds (Curator''s forceSet)';

COMMENT ON FUNCTION zk_participants(text) IS
'nodes of the recipe at path in queue order, with their data and which of them hold (Curator''s getParticipantNodes)';

COMMENT ON FUNCTION zk_lock_token(text) IS
'fencing token of the lock this session holds at path: its node''s creation zxid';

COMMENT ON FUNCTION zk_locks() IS
'every zklock lock held or waited for in this cluster, as the zk_locks view shows it';

COMMENT ON FUNCTION zk_leader_join(text, text, text) IS
'join the leader election at path as id, for this session or the whole cluster (Curator''s LeaderLatch.start)';

COMMENT ON FUNCTION zk_leader_leave(text) IS
'leave the leader election at path (Curator''s LeaderLatch.close)';

COMMENT ON FUNCTION zk_has_leadership(text) IS
'whether our member of the leader election at path leads, with proof (Curator''s LeaderLatch.hasLeadership)';

COMMENT ON FUNCTION zk_leader_await(text, interval) IS
'wait until our member of the leader election at path leads (Curator''s LeaderLatch.await); false when the timeout passed first';

COMMENT ON FUNCTION zk_leader_xact(text) IS
'whether our member of the leader election at path leads; when true, COMMIT fails if that leadership ended first';

COMMENT ON FUNCTION zk_leader(text) IS
'id of the leader of the election at path (Curator''s LeaderLatch.getLeader); NULL when there is no member';

-- teach.sql: teach PostgreSQL's isolation tester to see a zklock wait.
--
-- isolationtester decides that a step waits (and prints "<waiting ...>")
-- by calling pg_catalog.pg_isolation_test_session_is_blocked(pid,
-- session_pids), which asks PostgreSQL's lock manager only: a backend
-- waiting for a zklock lock waits on its latch, not in the lock manager,
-- so the tester would take it for a slow step and wait for it to end.
-- This script, run as a superuser in the database the specs run in (test
-- 602 makes one for them), replaces that function there, and only there
-- (pg_proc is per database), by one that gives the lock manager's answer,
-- or true when zk_locks shows the backend queued behind a node of one of
-- the tester's sessions:
--
--   mutex, read/write lock: waiting, behind (waiting_for) the node of
--     another session's row of zk_locks on the same path, held or waiting;
--   semaphore mutex, lease step (its lease node made): another session
--     holds the lease of the same path;
--   semaphore mutex, P/locks step (no lease node yet, waiting_for its
--     place in P/locks): another session of the same path is at its lease
--     step, holding P/locks while it waits.
--
-- A blocker that lets go (commits, or aborts as a deadlock's victim)
-- leaves zk_locks at once, before its COMMIT or error reaches the tester,
-- so its waiters stop counting as blocked before the worker has handed
-- them the lock: the tester then waits for them to finish, as it does for
-- a heavyweight waiter that PostgreSQL wakes in the releasing backend.
-- That keeps the order of the "<... completed>" lines fixed.  An acquire
-- granted at once never shows as waiting: it has no waiting_for, and no
-- lease of another session.
--
-- How: a built-in function is called through its entry in the server's
-- table of built-ins, by OID, whatever pg_proc says, so CREATE OR
-- REPLACE alone changes nothing for a call.  But the planner inlines a
-- call of a LANGUAGE sql function whose body is one plain expression (no
-- FROM, no sub-select), and it reads pg_proc for that: the replacement
-- below is such a body, so the tester's query is planned into it and
-- never reaches the built-in.  The two functions it calls are ordinary
-- ones: the original, reachable as zklock_test_lock_manager_blocked (a
-- LANGUAGE internal function naming the same built-in), and
-- zklock_test_zklock_blocked, the look at zk_locks.  Test 602 checks that
-- a session queued for a zklock lock is seen as blocked before it runs
-- a spec.
CREATE FUNCTION public.zklock_test_lock_manager_blocked(integer, integer[])
RETURNS boolean
LANGUAGE internal STRICT VOLATILE PARALLEL SAFE
AS 'pg_isolation_test_session_is_blocked';

CREATE FUNCTION public.zklock_test_zklock_blocked(pid integer, session_pids integer[])
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
SELECT EXISTS (
    SELECT FROM public.zk_locks w
      JOIN public.zk_locks h ON h.path = w.path
     WHERE w.pid = $1
       AND w.state = 'waiting'
       AND h.pid <> $1
       AND h.pid = ANY ($2)
       AND ((w.recipe <> 'semaphore_mutex'
             AND w.waiting_for IS NOT NULL
             AND h.node = w.waiting_for)
            OR (w.recipe = 'semaphore_mutex'
                AND h.recipe = 'semaphore_mutex'
                AND w.node IS NOT NULL
                AND h.state = 'held')
            OR (w.recipe = 'semaphore_mutex'
                AND h.recipe = 'semaphore_mutex'
                AND w.node IS NULL
                AND w.waiting_for IS NOT NULL
                AND h.state = 'waiting'
                AND h.node IS NOT NULL)))
$$;

CREATE OR REPLACE FUNCTION pg_catalog.pg_isolation_test_session_is_blocked(integer, integer[])
RETURNS boolean
LANGUAGE sql VOLATILE
AS $$
SELECT public.zklock_test_lock_manager_blocked($1, $2)
    OR public.zklock_test_zklock_blocked($1, $2)
$$;

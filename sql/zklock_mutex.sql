--
-- zklock mutex: single-session behaviour
--
CREATE EXTENSION zklock;

-- wait (bounded) until the worker has its ZooKeeper session
DO $$
BEGIN
	FOR i IN 1..300 LOOP
		EXIT WHEN (SELECT state FROM zk_status()) = 'connected';
		PERFORM pg_sleep(0.1);
	END LOOP;
END
$$;
SELECT state, session_id IS NOT NULL AS has_session, server IS NOT NULL AS has_server,
       session_timeout > 0 AS has_timeout, requests_queued, locks_held, worker_pid > 0 AS has_worker
  FROM zk_status();

-- what a lock looks like in zk_locks: node names are Curator's protected names
CREATE FUNCTION my_locks() RETURNS TABLE(recipe text, path text, node_ok boolean, mode text,
                                          scope text, count integer, state text, token_ok boolean)
LANGUAGE sql AS $$
	SELECT recipe, path,
	       node ~ '^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-lock-[0-9]{10}$',
	       mode, scope, count, state, token > 0
	  FROM zk_locks WHERE pid = pg_backend_pid() ORDER BY path
$$;

-- acquire and release
SELECT zk_mutex_acquire('/zklock_regress/a');
SELECT * FROM my_locks();
SELECT zk_mutex_release('/zklock_regress/a');
SELECT * FROM my_locks();

-- reentrant: two acquires need two releases
SELECT zk_mutex_acquire('/zklock_regress/a');
SELECT zk_mutex_acquire('/zklock_regress/a', '1s');
SELECT count FROM my_locks();
SELECT zk_mutex_release('/zklock_regress/a');
SELECT count, state FROM my_locks();
SELECT zk_mutex_release('/zklock_regress/a');
SELECT count(*) FROM my_locks();

-- releasing what this session does not hold: false and a WARNING
SELECT zk_mutex_release('/zklock_regress/a');
SELECT zk_mutex_release('/zklock_regress/never');

-- try_acquire and a zero timeout take a free lock at once
SELECT zk_mutex_try_acquire('/zklock_regress/b');
SELECT zk_mutex_acquire('/zklock_regress/c', '0s');
SELECT path, count FROM my_locks();
SELECT zk_locks_held FROM (SELECT locks_held AS zk_locks_held FROM zk_status()) s;
SELECT zk_release_all();
SELECT count(*) FROM my_locks();
SELECT zk_release_all();

-- several locks at once, deep paths (parents are created as needed)
SELECT zk_mutex_acquire('/zklock_regress/deep/er/than/that');
SELECT zk_mutex_acquire('/zklock_regress/d2');
SELECT path FROM my_locks();
SELECT zk_release_all();

-- transaction scope: released at commit
BEGIN;
SELECT zk_mutex_acquire_xact('/zklock_regress/x');
SELECT path, scope, count, state FROM my_locks();
-- zk_mutex_release does not release a transaction-level lock
SELECT zk_mutex_release('/zklock_regress/x');
COMMIT;
SELECT count(*) FROM my_locks();

-- ... and at abort
BEGIN;
SELECT zk_mutex_acquire_xact('/zklock_regress/x');
SELECT count(*) FROM my_locks();
ROLLBACK;
SELECT count(*) FROM my_locks();

-- ... and when the transaction fails
BEGIN;
SELECT zk_mutex_acquire_xact('/zklock_regress/x');
SELECT 1/0;
ROLLBACK;
SELECT count(*) FROM my_locks();

-- savepoints: a rolled-back savepoint releases what it took
BEGIN;
SELECT zk_mutex_acquire_xact('/zklock_regress/outer');
SAVEPOINT s1;
SELECT zk_mutex_acquire_xact('/zklock_regress/inner');
SELECT path FROM my_locks();
ROLLBACK TO SAVEPOINT s1;
SELECT path FROM my_locks();
-- a released savepoint hands its locks to the transaction
SAVEPOINT s2;
SELECT zk_mutex_acquire_xact('/zklock_regress/inner2');
RELEASE SAVEPOINT s2;
SELECT path FROM my_locks();
COMMIT;
SELECT count(*) FROM my_locks();

-- session and transaction holds of the same lock: one node, two counts
SELECT zk_mutex_acquire('/zklock_regress/both');
BEGIN;
SELECT zk_mutex_acquire_xact('/zklock_regress/both');
SELECT scope, count FROM my_locks();
COMMIT;
SELECT scope, count FROM my_locks();
SELECT zk_mutex_release('/zklock_regress/both');
SELECT count(*) FROM my_locks();

-- a session lock taken inside a transaction outlives its rollback
BEGIN;
SELECT zk_mutex_acquire('/zklock_regress/sess');
ROLLBACK;
SELECT path, scope FROM my_locks();
SELECT zk_mutex_release('/zklock_regress/sess');

-- PREPARE TRANSACTION while holding a transaction-level lock is refused
BEGIN;
SELECT zk_mutex_acquire_xact('/zklock_regress/p');
PREPARE TRANSACTION 'zklock_regress';
SELECT count(*) FROM my_locks();
SELECT count(*) FROM pg_prepared_xacts;

-- (that a session-level lock does not stop PREPARE is test/t/105's: a
-- server prepares transactions only with max_prepared_transactions set,
-- and this suite runs on a server with its defaults)

-- a session lock taken in the transaction under
-- zklock.check_session_locks_at_commit is relied on: PREPARE is refused,
-- the lock stays held
SET zklock.check_session_locks_at_commit = on;
BEGIN;
SELECT zk_mutex_acquire('/zklock_regress/p3');
PREPARE TRANSACTION 'zklock_regress_p3';
SELECT count(*) FROM pg_prepared_xacts;
SELECT path FROM my_locks();
SELECT zk_mutex_release('/zklock_regress/p3');
RESET zklock.check_session_locks_at_commit;

-- namespace: the prefix is applied, zk_locks shows the user's path
SET zklock.namespace = '/zklock_regress_ns';
SELECT zk_mutex_acquire('/n');
SELECT path FROM my_locks();
SELECT zk_mutex_release('/n');
RESET zklock.namespace;

SELECT requests_queued, locks_held FROM zk_status();

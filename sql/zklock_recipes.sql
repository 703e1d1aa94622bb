--
-- zklock recipes other than the mutex: single-session behaviour
--
-- (runs after zklock_mutex, which created the extension and waited for the
-- connection)

CREATE FUNCTION rlocks() RETURNS TABLE(recipe text, path text, mode text,
                                          scope text, count integer, state text)
LANGUAGE sql AS $$
	SELECT recipe, path, mode, scope, count, state
	  FROM zk_locks WHERE pid = pg_backend_pid() ORDER BY path, recipe, node
$$;

-- read/write lock: shared reads, reentrant
SELECT zk_read_lock_acquire('/zklock_regress/rw');
SELECT zk_read_lock_acquire('/zklock_regress/rw', '1s');
SELECT * FROM rlocks();
-- upgrade: without a timeout it is refused, with one it times out
SELECT zk_write_lock_acquire('/zklock_regress/rw');
SELECT zk_write_lock_acquire('/zklock_regress/rw', '200ms');
SELECT zk_read_lock_release('/zklock_regress/rw');
SELECT zk_read_lock_release('/zklock_regress/rw');
SELECT zk_read_lock_release('/zklock_regress/rw');
SELECT count(*) FROM rlocks();

-- write lock, then downgrade: the read lock comes at once, at the
-- writer's place in the queue
SELECT zk_write_lock_acquire('/zklock_regress/rw2');
SELECT zk_read_lock_acquire('/zklock_regress/rw2', '0s');
SELECT * FROM rlocks();
SELECT count(*) AS same_sequence
  FROM zk_locks WHERE pid = pg_backend_pid() AND path = '/zklock_regress/rw2'
 GROUP BY right(node, 10);
SELECT position, kind, holds FROM zk_participants('/zklock_regress/rw2')
 WHERE kind = 'write';
SELECT zk_write_lock_release('/zklock_regress/rw2');
SELECT * FROM rlocks();
SELECT zk_read_lock_release('/zklock_regress/rw2');

-- transaction-level read and write locks
BEGIN;
SELECT zk_write_lock_acquire_xact('/zklock_regress/rw3');
SELECT zk_read_lock_acquire_xact('/zklock_regress/rw4');
SELECT * FROM rlocks();
COMMIT;
SELECT count(*) FROM rlocks();

-- non-reentrant mutex: Curator's semaphore layout; a second acquire is an error
SELECT zk_semaphore_mutex_acquire('/zklock_regress/smx');
SELECT zk_semaphore_mutex_acquire('/zklock_regress/smx');
SELECT * FROM rlocks();
SELECT kind FROM zk_participants('/zklock_regress/smx');
SELECT zk_semaphore_mutex_release('/zklock_regress/smx');
SELECT zk_semaphore_mutex_release('/zklock_regress/smx');
BEGIN;
SELECT zk_semaphore_mutex_acquire_xact('/zklock_regress/smx', '5s');
SELECT count(*) FROM rlocks();
ROLLBACK;
SELECT count(*) FROM rlocks();

-- multi-lock: all in order, released in reverse
SELECT zk_multi_lock_acquire(ARRAY['/zklock_regress/m1', '/zklock_regress/m2', '/zklock_regress/m3']);
SELECT path FROM rlocks();
SELECT zk_multi_lock_release(ARRAY['/zklock_regress/m1', '/zklock_regress/m2', '/zklock_regress/m3']);
SELECT count(*) FROM rlocks();
-- reentrant with the mutex it is made of
SELECT zk_mutex_acquire('/zklock_regress/m1');
SELECT zk_multi_lock_acquire(ARRAY['/zklock_regress/m1', '/zklock_regress/m2'], '1s');
SELECT path, count FROM rlocks();
SELECT zk_multi_lock_release(ARRAY['/zklock_regress/m1', '/zklock_regress/m2']);
SELECT path, count FROM rlocks();
SELECT zk_mutex_release('/zklock_regress/m1');
-- releasing a multi-lock that is not held: false, with a WARNING per path
SELECT zk_multi_lock_release(ARRAY['/zklock_regress/m1', '/zklock_regress/m2']);
SELECT count(*) FROM rlocks();

-- semaphore: leases are Curator's lease nodes
SELECT array_length(zk_semaphore_acquire('/zklock_regress/sem', 3, 2), 1) AS leases;
SELECT recipe, mode, count(*) FROM rlocks() GROUP BY 1, 2;
-- the third lease fits, a fourth does not (the timeout passes: NULL)
SELECT zk_semaphore_acquire('/zklock_regress/sem', 3) IS NOT NULL AS third;
SELECT zk_semaphore_acquire('/zklock_regress/sem', 3, 1, '300ms') AS fourth;
SELECT zk_semaphore_acquire('/zklock_regress/sem', 3, 1, '0s') AS fourth_try;
SELECT count(*) AS lease_nodes FROM zk_participants('/zklock_regress/sem');
SELECT zk_semaphore_release('/zklock_regress/sem',
       (SELECT node FROM zk_locks WHERE pid = pg_backend_pid() AND recipe = 'semaphore' LIMIT 1));
SELECT zk_semaphore_release('/zklock_regress/sem', '_c_not-a-lease-of-mine');
SELECT zk_semaphore_release_all('/zklock_regress/sem');
SELECT zk_semaphore_release_all('/zklock_regress/sem');
SELECT count(*) FROM rlocks();
-- all or nothing: 2 of max 1 is refused up front
SELECT zk_semaphore_acquire('/zklock_regress/sem', 1, 2);
BEGIN;
SELECT array_length(zk_semaphore_acquire_xact('/zklock_regress/sem', 5, 3), 1);
SELECT scope, count(*) FROM rlocks() GROUP BY 1;
COMMIT;
SELECT count(*) FROM rlocks();

-- barrier
SELECT zk_barrier_wait('/zklock_regress/bar', '1s') AS down_at_once;
SELECT zk_barrier_set('/zklock_regress/bar') AS set, zk_barrier_set('/zklock_regress/bar') AS again;
SELECT zk_barrier_wait('/zklock_regress/bar', '200ms') AS times_out;
SELECT zk_barrier_remove('/zklock_regress/bar') AS removed, zk_barrier_remove('/zklock_regress/bar') AS again;
SELECT zk_barrier_wait('/zklock_regress/bar') AS down;
-- a lock path is not a barrier: removing it is refused
SELECT zk_mutex_acquire('/zklock_regress/notabarrier');
SELECT zk_barrier_remove('/zklock_regress/notabarrier');
SELECT zk_mutex_release('/zklock_regress/notabarrier');

-- double barrier: alone on a barrier of one
SELECT zk_double_barrier_enter('/zklock_regress/db', 1);
SELECT recipe, mode, state FROM rlocks();
SELECT kind FROM zk_participants('/zklock_regress/db') ORDER BY kind;
SELECT zk_double_barrier_enter('/zklock_regress/db', 1);
SELECT zk_double_barrier_leave('/zklock_regress/db', '5s');
SELECT count(*) FROM zk_participants('/zklock_regress/db');
SELECT zk_double_barrier_leave('/zklock_regress/db');
-- too few members: false, and our member node is gone again
SELECT zk_double_barrier_enter('/zklock_regress/db2', 3, '300ms');
SELECT count(*) FROM zk_participants('/zklock_regress/db2');
SELECT count(*) FROM rlocks();

-- revocation: zk_revoke writes __REVOKE__ into the holder's node
SELECT zk_mutex_acquire('/zklock_regress/rv', NULL, true);
SELECT zk_revoke('/zklock_regress/rv');
DO $$
BEGIN
	FOR i IN 1..100 LOOP
		EXIT WHEN EXISTS (SELECT FROM zk_revocation_requested());
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT * FROM zk_revocation_requested();
SELECT path, revocation_requested FROM zk_locks WHERE pid = pg_backend_pid();
SELECT data FROM zk_participants('/zklock_regress/rv');
SELECT zk_mutex_release('/zklock_regress/rv');
SELECT zk_revoke('/zklock_regress/nobody');
-- a revocable lock's node is created with empty data, as Curator does
SELECT zk_read_lock_acquire('/zklock_regress/rv2', NULL, true);
SELECT kind, data IS NULL AS empty_data, holds FROM zk_participants('/zklock_regress/rv2');
SELECT zk_read_lock_release('/zklock_regress/rv2');

-- participants carry the holder's identity, as it is when the lock is taken
SET application_name = 'zklock-regress-app';
SELECT zk_mutex_acquire('/zklock_regress/p');
SELECT position, kind, holds, (data::json)->>'database' = current_database() AS my_db,
       (data::json)->>'pid' = pg_backend_pid()::text AS my_pid,
       (data::json)->>'application_name' AS app
  FROM zk_participants('/zklock_regress/p');
SELECT count(*) FROM zk_participants('/zklock_regress/never-used');

-- fencing tokens grow with every new holder
CREATE TEMP TABLE tokens(round int, token bigint);
INSERT INTO tokens SELECT 1, zk_lock_token('/zklock_regress/p');
SELECT zk_mutex_release('/zklock_regress/p');
SELECT zk_mutex_acquire('/zklock_regress/p');
INSERT INTO tokens SELECT 2, zk_lock_token('/zklock_regress/p');
SELECT zk_mutex_release('/zklock_regress/p');
SELECT zk_write_lock_acquire('/zklock_regress/p2');
INSERT INTO tokens SELECT 3, zk_lock_token('/zklock_regress/p2');
SELECT zk_write_lock_release('/zklock_regress/p2');
SELECT bool_and(token > prev) AS increasing
  FROM (SELECT token, lag(token) OVER (ORDER BY round) AS prev FROM tokens) t
 WHERE prev IS NOT NULL;
SELECT zk_lock_token('/zklock_regress/p');

-- zk_release_all covers every recipe
SELECT zk_mutex_acquire('/zklock_regress/all1');
SELECT zk_read_lock_acquire('/zklock_regress/all2');
SELECT zk_semaphore_mutex_acquire('/zklock_regress/all3');
SELECT zk_semaphore_acquire('/zklock_regress/all4', 2) IS NOT NULL;
SELECT zk_double_barrier_enter('/zklock_regress/all5', 1);
SELECT count(*) FROM rlocks();
SELECT zk_release_all();
SELECT count(*) FROM rlocks();

SELECT requests_queued, locks_held FROM zk_status();

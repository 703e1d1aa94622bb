--
-- zklock: bad input gets a clear error with an SQLSTATE, and nothing is
-- sent to ZooKeeper
--
CREATE FUNCTION try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE stmt;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

SELECT stmt, try(stmt) FROM (VALUES
	($$SELECT zk_mutex_acquire(NULL)$$),
	($$SELECT zk_mutex_acquire('')$$),
	($$SELECT zk_mutex_acquire('a/b')$$),
	($$SELECT zk_mutex_acquire('/')$$),
	($$SELECT zk_mutex_acquire('/a/')$$),
	($$SELECT zk_mutex_acquire('/a//b')$$),
	($$SELECT zk_mutex_acquire('/a/./b')$$),
	($$SELECT zk_mutex_acquire('/a/..')$$),
	($$SELECT zk_mutex_acquire('/.')$$),
	($$SELECT zk_mutex_acquire(E'/a\x01b')$$),
	($$SELECT zk_mutex_acquire(E'/a\x7fb')$$),
	($$SELECT zk_mutex_acquire(E'/a\u0085b')$$),
	($$SELECT zk_mutex_acquire(E'/a\uE000b')$$),
	($$SELECT zk_mutex_acquire(E'/a\uFFF5b')$$),
	($$SELECT zk_mutex_acquire('/zookeeper')$$),
	($$SELECT zk_mutex_acquire('/zookeeper/quota')$$),
	($$SELECT zk_mutex_acquire('/' || repeat('x', 480))$$),
	($$SELECT zk_mutex_acquire('/' || repeat('x', 100000))$$),
	($$SELECT zk_mutex_acquire('/ok', '-1 second')$$),
	($$SELECT zk_mutex_acquire('/ok', '1 day -25 hours')$$),
	($$SELECT zk_mutex_acquire('/ok', '-1 month')$$),
	($$SELECT zk_mutex_acquire('/ok', '178000000 years')$$),
	($$SELECT zk_mutex_acquire_xact(NULL)$$),
	($$SELECT zk_mutex_acquire_xact('no-slash')$$),
	($$SELECT zk_mutex_acquire_xact('/ok', '-5 min')$$),
	($$SELECT zk_mutex_try_acquire(NULL)$$),
	($$SELECT zk_mutex_try_acquire('/a/')$$),
	($$SELECT zk_mutex_release(NULL)$$),
	($$SELECT zk_mutex_release('//')$$),
	($$SET zklock.namespace = 'no-slash'$$),
	($$SET zklock.namespace = '/trailing/'$$),
	($$SET zklock.max_requests = 10$$)
) v(stmt);

-- the longest allowed path is fine (480 bytes), non-ASCII too
SELECT zk_mutex_try_acquire('/' || repeat('y', 479));
SELECT zk_mutex_try_acquire('/zklock_regress/äöü-ß');
SELECT zk_mutex_try_acquire('/zookeeperish');
SELECT zk_release_all();

-- nothing was queued or left behind by the rejected calls
SELECT requests_queued, locks_held FROM zk_status();
SELECT count(*) FROM zk_locks;

-- the recipes reject bad input the same way
SELECT stmt, try(stmt) FROM (VALUES
	($$SELECT zk_read_lock_acquire(NULL)$$),
	($$SELECT zk_read_lock_acquire('/a/', '1s')$$),
	($$SELECT zk_write_lock_acquire('/ok', '-1s')$$),
	($$SELECT zk_write_lock_acquire_xact('x')$$),
	($$SELECT zk_read_lock_release('')$$),
	($$SELECT zk_semaphore_mutex_acquire('/zookeeper/x')$$),
	($$SELECT zk_semaphore_mutex_acquire_xact('/ok', '-1 day')$$),
	($$SELECT zk_multi_lock_acquire(NULL)$$),
	($$SELECT zk_multi_lock_acquire('{}')$$),
	($$SELECT zk_multi_lock_acquire(ARRAY['/a', NULL])$$),
	($$SELECT zk_multi_lock_acquire(ARRAY['/a', '/b', '/a'])$$),
	($$SELECT zk_multi_lock_acquire(ARRAY[['/a'], ['/b']])$$),
	($$SELECT zk_multi_lock_acquire(ARRAY['/a', 'b'])$$),
	($$SELECT zk_multi_lock_acquire(ARRAY['/a'], '-1s')$$),
	($$SELECT zk_multi_lock_release(ARRAY['/a', '/a'])$$),
	($$SELECT zk_semaphore_acquire('/s', 0)$$),
	($$SELECT zk_semaphore_acquire('/s', -3)$$),
	($$SELECT zk_semaphore_acquire('/s', NULL)$$),
	($$SELECT zk_semaphore_acquire('/s', 2, 0)$$),
	($$SELECT zk_semaphore_acquire('/s', 2, 3)$$),
	($$SELECT zk_semaphore_acquire('/s', 2, 1, '-1s')$$),
	($$SELECT zk_semaphore_acquire('s', 2)$$),
	($$SELECT zk_semaphore_release('/s', NULL)$$),
	($$SELECT zk_semaphore_release('/s', repeat('x', 200))$$),
	($$SELECT zk_semaphore_release('/s', 'a/b')$$),
	($$SELECT zk_semaphore_release('/s', '..')$$),
	($$SELECT zk_semaphore_release('/s', '')$$),
	($$SELECT zk_semaphore_release('/s', E'lease\x01')$$),
	($$SELECT zk_semaphore_release_all('/s/')$$),
	($$SELECT zk_barrier_set('')$$),
	($$SELECT zk_barrier_remove('/zookeeper')$$),
	($$SELECT zk_barrier_remove('/')$$),
	($$SELECT zk_barrier_wait('/b', '-1s')$$),
	($$SELECT zk_double_barrier_enter('/d', 0)$$),
	($$SELECT zk_double_barrier_enter('/d', NULL)$$),
	($$SELECT zk_double_barrier_enter('/d', 2, '-1s')$$),
	($$SELECT zk_double_barrier_leave('/never-entered')$$),
	($$SELECT zk_revoke('/a/../b')$$),
	($$SELECT zk_participants(NULL)$$),
	($$SELECT zk_lock_token('/not-held')$$),
	($$SELECT zk_lock_token(E'/a\x02')$$)
) v(stmt);

SELECT requests_queued, locks_held FROM zk_status();
SELECT count(*) FROM zk_locks;

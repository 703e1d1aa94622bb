--
-- zklock privileges: what changes shared state is not for PUBLIC
--
CREATE ROLE regress_zklock_nobody LOGIN;
CREATE ROLE regress_zklock_app LOGIN;
GRANT zklock_user TO regress_zklock_app;

SET ROLE regress_zklock_nobody;
-- no grant: every function that takes, releases or writes is refused
SELECT zk_mutex_acquire('/zklock_regress/sec');
SELECT zk_mutex_try_acquire('/zklock_regress/sec');
SELECT zk_read_lock_acquire('/zklock_regress/sec');
SELECT zk_semaphore_acquire('/zklock_regress/sec', 2);
SELECT zk_barrier_remove('/zklock_regress/sec');
SELECT zk_revoke('/zklock_regress/sec');
SELECT zk_participants('/zklock_regress/sec');
SELECT zk_release_all();
-- what only shows this cluster's own state stays open
SELECT state FROM zk_status();
SELECT count(*) FROM zk_locks;
SELECT count(*) FROM zk_revocation_requested();
-- the namespace and the credentials are a superuser's business
SET zklock.namespace = '/elsewhere';
-- (SQLSTATE only: PostgreSQL 17 words this error differently from 15)
\set VERBOSITY sqlstate
SHOW zklock.auth;
\set VERBOSITY default
RESET ROLE;

SET ROLE regress_zklock_app;
-- granted through zklock_user
SELECT zk_mutex_acquire('/zklock_regress/sec');
SELECT path, state FROM zk_locks WHERE pid = pg_backend_pid();
SELECT zk_mutex_release('/zklock_regress/sec');
SET zklock.namespace = '/elsewhere';
-- paths cannot climb out of the namespace
SELECT zk_mutex_acquire('/../sec');
RESET ROLE;

-- the secret is never listed in pg_settings, even to a superuser (that
-- SHOW hides a secret that is set, as ********, is test/t/210's: this
-- suite runs on a server without zklock.auth)
SELECT count(*) FROM pg_settings WHERE name = 'zklock.auth';

-- the commit check for session locks is a user setting
SET zklock.check_session_locks_at_commit = on;
BEGIN;
SELECT zk_mutex_acquire('/zklock_regress/sec2');
COMMIT;
SELECT zk_mutex_release('/zklock_regress/sec2');
RESET zklock.check_session_locks_at_commit;

DROP ROLE regress_zklock_nobody;
REVOKE zklock_user FROM regress_zklock_app;
DROP ROLE regress_zklock_app;

# env.sh — sourced by every entry script of zklock's tests, demo and
# benchmark (bash).  It makes them independent of the caller's environment
# and tells them which platform they run on.
#
# The environment: a fresh Debian root shell may have no locale, no HOME,
# no USER and a bare PATH (`env -i`), while a developer's shell may carry a
# locale that is not installed (initdb then refuses to start and Perl warns
# on every call).  So the scripts set what they need themselves:
#   PATH      the standard directories, then whatever the caller had
#   LC_ALL    C.UTF-8 (built into Debian's libc-bin, always present), so
#             javac, Perl, initdb and psql read and write UTF-8 the same way
#             everywhere; PostgreSQL's own tools are still given explicit
#             encodings, so nothing relies on this
#   HOME      the current user's home from the password database when unset
#
# The platform, from /etc/os-release (ZKLOCK_PG_MAJOR overrides it):
#   Debian 12 (bookworm)  PostgreSQL 15, ZooKeeper 3.8, Curator 5.4, JDK 17
#   Debian 13 (trixie)    PostgreSQL 17, ZooKeeper 3.9, Curator 5.7, JDK 21
#   Debian forky (testing) PostgreSQL 18, ZooKeeper 3.9, Curator 5.7, JDK 25
# Exported: ZKLOCK_DEBIAN (codename), PG_MAJOR, PGBIN, PG_CONFIG.
# ZKLOCK_PGBIN points them at another (relocated) copy of the server, so
# a developer can test a build without installing it system-wide.

export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}"
unset LANGUAGE LC_CTYPE LC_COLLATE LC_MESSAGES LC_MONETARY LC_NUMERIC LC_TIME
export LANG=C.UTF-8 LC_ALL=C.UTF-8
if [ -z "${HOME:-}" ]; then
	HOME=$(getent passwd "$(id -u)" | cut -d: -f6)
	export HOME=${HOME:-/}
fi
export USER=${USER:-$(id -un)}

ZKLOCK_DEBIAN=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
export ZKLOCK_DEBIAN

# zklock_default_pg_major: the PostgreSQL major version Debian ships on this
# release (what install-deps.sh installs).
zklock_default_pg_major() {
	case "$ZKLOCK_DEBIAN" in
		bookworm) echo 15 ;;
		trixie) echo 17 ;;
		forky) echo 18 ;;
		*)
			# another release: the newest server headers installed, else 15
			local d
			d=$(ls -d /usr/lib/postgresql/*/lib/pgxs 2>/dev/null | sort -t/ -k4 -n | tail -n 1)
			if [ -n "$d" ]; then
				d=${d#/usr/lib/postgresql/}
				echo "${d%%/*}"
			else
				echo 15
			fi
			;;
	esac
}

export PG_MAJOR=${ZKLOCK_PG_MAJOR:-$(zklock_default_pg_major)}
export PGBIN=${ZKLOCK_PGBIN:-/usr/lib/postgresql/$PG_MAJOR/bin}
export PG_CONFIG=$PGBIN/pg_config

# root-lib.sh — sourced by test/debian-root.sh and test/package-root.sh
# (bash): build a fresh minimal Debian root with debootstrap and run a
# command inside it, as root, with an empty environment, in new mount and
# PID namespaces entered with pivot_root.
#
# The root runs in its own mount and PID namespaces: /proc, /dev and /sys
# are mounted for it there, so they vanish with it, and every process
# started inside (ZooKeeper, PostgreSQL, Java peers) is killed when the
# command ends.  The root is entered with pivot_root, not chroot: it becomes
# "/" of that mount namespace and the host's tree is detached from it.  The
# kernel refuses a new user namespace to a chrooted process (EPERM), and
# the TAP tests that cut ZooKeeper servers off from one another
# (test/perl/ZklockNet.pm) run in user and network namespaces of their own,
# as an unprivileged user; after pivot_root the root is a machine like any
# other for them.  It shares the host's network otherwise: its servers bind
# 127.0.0.1 on free ports like everywhere else.  Packages come from the
# mirror the host's apt uses (ZKLOCK_DEBIAN_MIRROR overrides it).
#
# The caller sets ROOT_LOG_TAG (the prefix of log lines) and, before
# root_cleanup runs, ZKLOCK_KEEP_ROOT (keep the roots afterwards).

# root_log MESSAGE...: a timestamped line on stdout
root_log() { echo "[${ROOT_LOG_TAG:-root} $(date +%H:%M:%S)] $*"; }

# root_die MESSAGE...: say why on stderr and exit 1
root_die() { echo "${ROOT_LOG_TAG:-root}: $*" >&2; exit 1; }

# root_host_mirror: the URL of the host's first Debian archive source (not
# the security archive), from deb822 .sources files or one-line .list files
root_host_mirror() {
	local url
	url=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' |
		grep -v security | head -n 1)
	[ -n "$url" ] || url=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
		grep -v security | sed 's/\[[^]]*\]//' | awk '{print $2}' | head -n 1)
	echo "$url"
}

# root_mounted_under DIR: list what is mounted at or below DIR
root_mounted_under() {
	awk -v d="$1" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts
}

# root_need_debootstrap: install debootstrap on the host when it is missing
root_need_debootstrap() {
	command -v debootstrap >/dev/null && return 0
	root_log "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

# root_debootstrap RELEASE DIR: a minimal root of RELEASE in DIR (which
# exists), from the host's mirror, ready for apt (see root_prepare).  A
# release newer than the host's debootstrap knows is built with its script
# for sid, which every release since bookworm shares.
root_debootstrap() {
	local release=$1 dir=$2 mirror script
	mirror=${ZKLOCK_DEBIAN_MIRROR:-$(root_host_mirror)}
	[ -n "$mirror" ] || root_die "no Debian mirror found in /etc/apt; set ZKLOCK_DEBIAN_MIRROR"
	root_need_debootstrap
	script=/usr/share/debootstrap/scripts/$release
	[ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
	root_log "debootstrap --variant=minbase $release into $dir (script $(basename "$script"))"
	if ! debootstrap --variant=minbase "$release" "$dir" "$mirror" "$script" >"$dir.debootstrap.log" 2>&1; then
		tail -n 30 "$dir.debootstrap.log" >&2
		rm -f "$dir.debootstrap.log"
		root_die "debootstrap failed"
	fi
	rm -f "$dir.debootstrap.log"
	root_prepare "$release" "$dir"
}

# root_prepare RELEASE DIR: what apt and the tests need in a fresh root
root_prepare() {
	local release=$1 dir=$2
	# it becomes "/" inside: the unprivileged test user must be able to enter it
	chmod 755 "$dir"
	# name resolution for apt; no service may start inside (Debian's
	# postgresql package would start a cluster on port 5432 of the shared
	# network)
	cp /etc/resolv.conf "$dir/etc/resolv.conf"
	# Debian testing's Release file is valid for a week only; the mirror may
	# be a snapshot older than that, which apt would refuse as expired
	[ "$release" = bookworm ] || [ "$release" = trixie ] ||
		echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99zklock-valid-until"
	printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
	chmod 755 "$dir/usr/sbin/policy-rc.d"
}

# root_copy_tree SRC DEST: copy the source tree SRC to DEST (made), without
# .git; from a git work tree, only the files git tracks or would track (not
# what it ignores: objects, tmp_install/, pg_regress results)
root_copy_tree() {
	mkdir -p "$2"
	if git -C "$1" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		# (a tracked file deleted in the work tree is left out, with a warning)
		git -C "$1" ls-files -z -co --exclude-standard |
			tar -C "$1" --null --ignore-failed-read -T - -cf - | tar -C "$2" -xf -
	else
		tar -C "$1" --exclude=./.git -cf - . | tar -C "$2" -xf -
	fi
}

# root_run DIR TIMEOUT WORKDIR COMMAND [VAR=VALUE...]: run the shell command
# COMMAND in WORKDIR inside the root DIR, as root, with an empty
# environment but for a basic PATH and the VAR=VALUE given, in new mount
# and PID namespaces (see the top of this file), bounded by TIMEOUT
# seconds; its exit status is the command's
root_run() {
	local dir=$1 limit=$2 workdir=$3 cmd=$4
	shift 4
	timeout --kill-after=30 "$limit" \
		unshare --mount --pid --fork --kill-child --propagation private \
		/bin/bash -c '
			set -e
			root=$1 workdir=$2 cmd=$3
			shift 3
			# the root becomes a mount of its own (pivot_root needs one),
			# and what it needs is mounted on it
			mount --bind "$root" "$root"
			mount -t proc proc "$root/proc"
			mount --rbind /dev "$root/dev"
			mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
			mount --rbind /sys "$root/sys"
			mount -t tmpfs -o mode=1777 tmp "$root/tmp"
			cd "$root"
			mkdir -p .oldroot
			pivot_root . .oldroot
			# "/" is the Debian root now (its own env, bash, umount); the
			# tree of the host is detached from this mount namespace
			exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@" \
				/bin/bash -c "umount -l /.oldroot && rmdir /.oldroot && cd $workdir && $cmd"
		' inner "$dir" "$workdir" "$cmd" "$@"
}

# root_remove DIR: remove the root DIR (or keep it, ZKLOCK_KEEP_ROOT=1),
# never while something is still mounted under it
root_remove() {
	local dir=$1 m
	[ -d "$dir" ] || return 0
	m=$(root_mounted_under "$dir")
	if [ -n "$m" ]; then
		# never delete through a mount of the host's /dev or /sys
		echo "${ROOT_LOG_TAG:-root}: still mounted under $dir, not removing it:" >&2
		echo "$m" >&2
		return 0
	fi
	if [ -n "${ZKLOCK_KEEP_ROOT:-}" ]; then
		root_log "root kept in $dir"
	else
		rm -rf --one-file-system "$dir"
	fi
}

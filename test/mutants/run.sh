#!/bin/bash
# run.sh — the adversary (test/t/905_adversary.pl), or the tests a mutant
# names, against mutants of src/ (issues 42, 43): do they kill each
# deliberately broken build, and with which check?
#
#   bash test/mutants/run.sh [--seconds N] [--seeds "S1 S2"]
#        [--mode standalone|ensemble] [--out FILE] [--results DIR]
#        [--until HH:MM] [--keep-logs] [--clean] [--dry-run] [MUTANT...]
#
# MUTANT: a patch of test/mutants/ by its number (05), its name
# (05-read-past-writer) or its path; none: every patch there.  --clean
# runs the unmodified tree the same way first (and alone when no MUTANT is
# named): it must pass, or a kill proves nothing.  --dry-run makes each
# copy and applies its patch, and says what it would run, without running.
#
# For each one, a fresh copy of the committed tree (git archive of the
# commit HEAD was at when the script started, and the patch as it was
# then, so a commit made meanwhile changes nothing) into a temporary
# folder under /var/tmp; zk-client/ copied from this tree, so the
# ZooKeeper C client is not built again), the patch applied (git apply),
# then for each seed, one after the other, the inner loop:
#   ZKLOCK_KEEP_LOGS=1 ZKLOCK_ADVERSARY_SEED=S ZKLOCK_ADVERSARY_MODE=M
#   ZKLOCK_ADVERSARY_SECONDS=N make check-tap T=905
# (build with -Werror, the server copied into the copy's tmp_install/, 905
# run as the user zklock), stopping at the first seed that kills it.  The
# mode is --mode, else the patch's "905-mode:" line, else standalone
# (ensemble needs network namespaces: README).
#
# Recorded per mutant: killed (905 failed with a "not ok" line), survived
# (905 passed on every seed), or error (905 failed without a failed check:
# a build, setup or harness failure, its output is kept); the first failed
# check (the first "not ok" line, after the subtest it is in), the seed,
# the minutes of 905 runs up to the kill (or in all; each run includes the
# copy's build), and whether the patch's markers appear in a log of the
# run: "zklock-mutant-hit NN" (the mutated code ran) and
# "zklock-mutant-diff NN" (it decided otherwise than the original would
# have; n/a when the patch has no such marker).
#
# A patch with a "tests:" line (e.g. "tests: 218") is aimed at those TAP
# tests instead: they run once (make check-tap T="218"), with no seed, and
# the row says so ("once (tests)").
#
# The table (markdown) is printed at the end and written to --out FILE.
# Each run's output (make's, with prove -v's TAP lines) and 905's own log
# (regress_log_905_adversary) are kept in the results folder (--results,
# default /var/tmp/zklock-mutants-DATE); the servers' logs (ZKLOCK_KEEP_LOGS
# puts them under /var/tmp/zklock-test.*) are removed after they were
# searched for the markers, unless --keep-logs.  The tree copies are
# removed when a mutant is done, and on exit.
#
# Bounded: each run by timeout (N + 1500 s; 905 itself is bounded by N +
# 900 s); with --until HH:MM (UTC, today) no run starts that could not end
# by then (N + 300 s are counted for one), and the mutants left are listed
# as not run.  One run at a time.  As root, as make check-tap (initdb
# refuses root: the tests run as the user zklock).
#
# Length: one run is the load (N seconds) plus about 2-4 minutes (build,
# server copy, clusters, Curator, the checks); see doc/testing.md.
set -uo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
MUT_DIR=$SRC/test/mutants

die() {
	echo "run.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '4,7p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

SECONDS_LOAD=120
SEEDS="12"
MODE=""
OUT=""
RESULTS=""
UNTIL=""
KEEP_LOGS=0
CLEAN=0
DRY=0
ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--seconds) SECONDS_LOAD=${2:?--seconds needs a number}; shift 2 ;;
	--seeds) SEEDS=${2:?--seeds needs a list}; shift 2 ;;
	--mode) MODE=${2:?--mode needs standalone or ensemble}; shift 2 ;;
	--out) OUT=${2:?--out needs a file}; shift 2 ;;
	--results) RESULTS=${2:?--results needs a folder}; shift 2 ;;
	--until) UNTIL=${2:?--until needs HH:MM}; shift 2 ;;
	--keep-logs) KEEP_LOGS=1; shift ;;
	--clean) CLEAN=1; shift ;;
	--dry-run) DRY=1; shift ;;
	-h | --help) usage ;;
	-*) echo "run.sh: unknown option $1" >&2; usage ;;
	*) ARGS+=("$1"); shift ;;
	esac
done
case "$SECONDS_LOAD" in '' | *[!0-9]*) die "--seconds must be a number" ;; esac
for s in $SEEDS; do
	case "$s" in *[!0-9]*) die "a seed must be a number (got $s)" ;; esac
done
[ -n "$SEEDS" ] || die "no seed"
case "$MODE" in '' | standalone | ensemble) ;; *) die "--mode must be standalone or ensemble" ;; esac
[ "$(id -u)" -eq 0 ] || die "run as root: make check-tap runs the tests as the user zklock (see doc/testing.md)"
command -v git >/dev/null || die "git is needed"
git -C "$SRC" rev-parse HEAD >/dev/null 2>&1 || die "$SRC is not a git checkout"

DEADLINE=""
if [ -n "$UNTIL" ]; then
	DEADLINE=$(date -u -d "$UNTIL" +%s) || die "--until: cannot read $UNTIL (HH:MM, UTC)"
fi

# the mutants asked for
PATCHES=()
if [ ${#ARGS[@]} -eq 0 ]; then
	if [ $CLEAN -eq 0 ]; then
		for p in "$MUT_DIR"/*.patch; do PATCHES+=("$p"); done
	fi
else
	for a in "${ARGS[@]}"; do
		if [ -f "$a" ]; then
			PATCHES+=("$(cd "$(dirname "$a")" && pwd)/$(basename "$a")")
			continue
		fi
		m=$(compgen -G "$MUT_DIR/${a%.patch}*.patch" | sort | head -n 1) ||
			die "no mutant matches '$a' (test/mutants/$a*.patch)"
		PATCHES+=("$m")
	done
fi

COMMIT=$(git -C "$SRC" rev-parse --short HEAD)
if ! git -C "$SRC" diff --quiet HEAD -- src; then
	echo "run.sh: note: src/ has uncommitted changes; the copies are of HEAD ($COMMIT) and leave them out" >&2
fi
STAMP=$(date -u +%Y%m%d-%H%M%S)
RESULTS=${RESULTS:-/var/tmp/zklock-mutants-$STAMP}
mkdir -p "$RESULTS" || die "cannot make $RESULTS"
WORK=$(mktemp -d /var/tmp/zklock-mutant-tree.XXXXXX) || die "mktemp failed"
chmod 755 "$WORK"
RUN_PID=""
# the patches as they are now: a commit or checkout made during the run
# (one that moves the files they patch) changes them no more than the tree
mkdir "$WORK/patches" || die "cannot make $WORK/patches"
for i in "${!PATCHES[@]}"; do
	cp "${PATCHES[$i]}" "$WORK/patches/" || die "cannot copy ${PATCHES[$i]}"
	PATCHES[$i]=$WORK/patches/$(basename "${PATCHES[$i]}")
done

cleanup() {
	if [ -n "$RUN_PID" ] && kill -0 "$RUN_PID" 2>/dev/null; then
		kill -TERM "$RUN_PID" 2>/dev/null
		wait "$RUN_PID" 2>/dev/null
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT TERM

ROWS=()
note() { echo "run.sh: $(date -u +%H:%M:%S) $*"; }

# make_tree DIR [PATCH]: the committed tree, zk-client/, the patch
make_tree() {
	local dir=$1 patch=${2:-}
	mkdir -p "$dir" || return 1
	git -C "$SRC" archive "$COMMIT" | tar -x -C "$dir" || return 1
	if [ -d "$SRC/zk-client" ]; then
		cp -a "$SRC/zk-client" "$dir/" || return 1
	fi
	if [ -n "$patch" ]; then
		(cd "$dir" && git apply --check "$patch" && git apply "$patch") || return 1
	fi
	chmod -R o+rX "$dir"
}

# run_905 TREE LABEL SEED MODE [TESTS]: one run (of TESTS instead of 905
# when given); sets R_RC, R_CHECK, R_SECS, R_LOGDIR, R_OUT
run_905() {
	local tree=$1 label=$2 seed=$3 mode=$4 tests=${5:-} t0
	R_OUT=$RESULTS/$label-seed$seed.out
	t0=$(date +%s)
	(
		cd "$tree" &&
			if [ -n "$tests" ]; then
				ZKLOCK_KEEP_LOGS=1 exec timeout -k 60 1500 make check-tap T="$tests"
			else
				ZKLOCK_KEEP_LOGS=1 ZKLOCK_ADVERSARY_SEED=$seed ZKLOCK_ADVERSARY_MODE=$mode \
				ZKLOCK_ADVERSARY_SECONDS=$SECONDS_LOAD \
				exec timeout -k 60 $((SECONDS_LOAD + 1500)) make check-tap T=905
			fi
	) > "$R_OUT" 2>&1 &
	RUN_PID=$!
	wait "$RUN_PID"
	R_RC=$?
	RUN_PID=""
	R_SECS=$(($(date +%s) - t0))
	R_LOGDIR=$(sed -n 's/^run-user-tests: the logs stay in //p' "$R_OUT" | tail -n 1)
	# the first failed test point, and the subtest it is in (the first
	# failed point of the top level), when that is another line
	R_CHECK=$(grep -m 1 -E '^[[:space:]]*not ok' "$R_OUT" | sed -E 's/^[[:space:]]*not ok [0-9]+( - )?//')
	local outer
	outer=$(grep -m 1 -E '^not ok' "$R_OUT" | sed -E 's/^not ok [0-9]+( - )?//')
	if [ -n "$outer" ] && [ "$outer" != "$R_CHECK" ]; then
		R_CHECK="$outer: $R_CHECK"
	fi
}

# markers LOGDIR NN KIND: yes when "zklock-mutant-KIND NN" is in a log of the run
markers() {
	local dir=$1 nn=$2 kind=$3
	[ -n "$dir" ] && [ -d "$dir" ] && grep -rqsF "zklock-mutant-$kind $nn" "$dir" && { echo yes; return; }
	echo no
}

# one row: a mutant (or the clean tree) over the seeds
run_one() {
	local patch=$1 label nn mode tree seed minutes=0 result="" check="" kseed="" hit=no diff=no has_diff=1 spent=0 tried=""
	local tests="" seeds=$SEEDS
	if [ -n "$patch" ]; then
		label=$(basename "$patch" .patch)
		nn=${label%%-*}
		mode=${MODE:-$(sed -n 's/^905-mode: *//p' "$patch" | head -n 1)}
		# a mutant aimed at other tests (its "tests:" line) runs them once
		tests=$(sed -n 's/^tests: *//p' "$patch" | head -n 1)
		[ -z "$tests" ] || { seeds=once; mode=tests; }
		grep -q 'ZKLOCK_MUTANT_MARK("diff")' "$patch" || has_diff=0
	else
		label=clean
		nn=""
		mode=$MODE
	fi
	mode=${mode:-standalone}
	tree=$WORK/$label
	note "$label: a fresh tree ($COMMIT)${patch:+ with $(basename "$patch")}"
	if ! make_tree "$tree" "$patch"; then
		ROWS+=("| $label | error: the patch does not apply | | | | | |")
		rm -rf "$tree"
		return
	fi
	for seed in $seeds; do
		if [ -n "$DEADLINE" ] && [ $(($(date +%s) + SECONDS_LOAD + 300)) -gt "$DEADLINE" ]; then
			note "$label: seed $seed not run: it could not end by $UNTIL"
			[ -n "$result" ] || result="not run (time)"
			break
		fi
		if [ -n "$tests" ]; then
			note "$label: tests $tests (output: $RESULTS/$label-seed$seed.out)"
		else
			note "$label: 905, seed $seed, $mode, ${SECONDS_LOAD}s of load (output: $RESULTS/$label-seed$seed.out)"
		fi
		if [ $DRY -eq 1 ]; then
			note "$label: dry run: (cd $tree && ZKLOCK_KEEP_LOGS=1 ZKLOCK_ADVERSARY_SEED=$seed ZKLOCK_ADVERSARY_MODE=$mode ZKLOCK_ADVERSARY_SECONDS=$SECONDS_LOAD make check-tap T=905)"
			result="dry run"
			continue
		fi
		run_905 "$tree" "$label" "$seed" "$mode" "$tests"
		spent=$((spent + R_SECS))
		tried="$tried $seed"
		if [ -n "$R_LOGDIR" ] && [ -f "$R_LOGDIR/tap/tmp_check/log/regress_log_905_adversary" ]; then
			cp "$R_LOGDIR/tap/tmp_check/log/regress_log_905_adversary" "$RESULTS/$label-seed$seed.regress_log"
		fi
		if [ -n "$nn" ]; then
			[ "$(markers "$R_LOGDIR" "$nn" hit)" = yes ] && hit=yes
			[ "$(markers "$R_LOGDIR" "$nn" diff)" = yes ] && diff=yes
		fi
		if [ -n "$R_LOGDIR" ] && [ $KEEP_LOGS -eq 0 ]; then
			rm -rf "$R_LOGDIR"
		elif [ -n "$R_LOGDIR" ]; then
			note "$label: the servers' logs stay in $R_LOGDIR"
		fi
		if [ "$R_RC" -eq 0 ]; then
			result=$([ -n "$patch" ] && echo survived || echo passed)
			note "$label: seed $seed: ${tests:-905} passed in $R_SECS s"
			continue
		fi
		if [ -n "$R_CHECK" ]; then
			result=$([ -n "$patch" ] && echo killed || echo FAILED)
			check=$R_CHECK
			kseed=$seed
			note "$label: seed $seed: ${tests:-905} failed in $R_SECS s: $check"
			break
		fi
		result="error (rc $R_RC, no failed check: see $label-seed$seed.out)"
		note "$label: seed $seed: ${tests:-905} ended with status $R_RC and no failed check"
	done
	minutes=$(awk -v s="$spent" 'BEGIN { printf "%.1f", s / 60 }')
	[ $has_diff -eq 1 ] || diff=n/a
	[ -n "$nn" ] || { hit=""; diff=""; }
	if [ -z "$tried" ] || [ $DRY -eq 1 ]; then
		minutes=""
		hit=""
		diff=""
	fi
	check=${check//|/\\|}
	ROWS+=("| $label | $result | $check | ${kseed:-${tried# }} ($mode) | $minutes | $hit | $diff |")
	rm -rf "$tree"
}

note "commit $COMMIT; seeds: $SEEDS; ${SECONDS_LOAD}s of load per run; results in $RESULTS"
[ $CLEAN -eq 1 ] && run_one ""
for p in "${PATCHES[@]}"; do
	run_one "$p"
done

{
	echo "Mutants of zklock against 905_adversary: $(date -u +%Y-%m-%d), commit $COMMIT, seeds $SEEDS, ${SECONDS_LOAD} s of load per run ($(basename "$0"))."
	echo
	echo "| mutant | result | first failed check | seed (mode) | minutes | mutated code reached | decided otherwise |"
	echo "|---|---|---|---|---|---|---|"
	for r in "${ROWS[@]}"; do echo "$r"; done
} > "$RESULTS/table.md"
echo
cat "$RESULTS/table.md"
[ -z "$OUT" ] || cp "$RESULTS/table.md" "$OUT"
echo
note "the outputs are in $RESULTS"

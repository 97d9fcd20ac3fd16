#!/bin/sh
# Runs every test program: the unit tests in $BUILD/tests, the fuzz corpus
# replayers in $BUILD/fuzz and the integration tests in tests/integration
# (real deskboxd, real containers).  Each prints TAP; this counts the
# assertions and prints the closing line "N passed, N failed, N skipped".
#
# A program passes when it exits 0, printed at least one "ok" line and a
# plan ("1..N") that matches the results it printed.  Exit 77 is a skip of
# the whole program and must say why ("SKIP reason"); "ok N - x # SKIP why"
# skips one part of a program and counts as skipped, not passed.
set -u
BUILD=${BUILD:-build}
export DESKBOX_BUILD="$(cd "$BUILD" && pwd)"
cd "$(dirname "$0")/.."
LOGDIR="$BUILD/test-logs"
mkdir -p "$LOGDIR"

passed=0 failed=0 skipped=0 programs_failed=""
# Progress: each program's line says which of how many it was.
total=$(ls tests/unit/test_*.c tests/fuzz/fuzz_*.c tests/integration/test_*.py 2>/dev/null | wc -l)
count=0
echo "running $total test programs (logs in $LOGDIR)"
run_one() {
	name=$1
	shift
	count=$((count + 1))
	log="$LOGDIR/$name.log"
	start=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	p=$(grep '^ok ' "$log" | grep -vc '# SKIP')
	s=$(grep '^ok ' "$log" | grep -c '# SKIP')
	f=$(grep -c '^not ok ' "$log")
	bad=""
	if [ "$rc" -eq 77 ]; then
		why=$(grep -m1 'SKIP' "$log" | sed 's/.*SKIP *//')
		if [ -n "$why" ]; then
			skipped=$((skipped + 1))
			echo "SKIP [$count/$total] $name: $why"
			return
		fi
		bad="it skipped (exit 77) without saying why"
	elif [ "$rc" -ne 0 ]; then
		bad="exit $rc"
	elif [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		bad="the program printed no result"
	else
		plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$log" | tail -1)
		[ "$plan" != $((p + f + s)) ] &&
			bad="the plan says ${plan:-nothing}, the program printed $((p + f + s)) results"
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	if [ -n "$bad" ] && [ "$f" -eq 0 ]; then
		failed=$((failed + 1))
	fi
	if [ -n "$bad" ]; then
		programs_failed="$programs_failed $name"
		echo "FAIL [$count/$total] $name ($p ok, $f not ok, ${secs}s): $bad"
		grep -E '^not ok|^#' "$log" | head -40 | sed 's/^/    /'
		tail -15 "$log" | grep -vE '^(ok|not ok|#)' | sed 's/^/    | /'
	else
		skips=""
		[ "$s" -ne 0 ] && skips=", $s skipped"
		echo "ok   [$count/$total] $name ($p ok$skips, ${secs}s)"
	fi
}

# A program that was not built is a failure, not something to pass over:
# the list comes from the sources, not from what happens to be in $BUILD.
missing() {
	count=$((count + 1))
	echo "FAIL [$count/$total] $1 (not built: $2 is missing)"
	programs_failed="$programs_failed $1"
	failed=$((failed + 1))
}

for src in tests/unit/test_*.c; do
	name=$(basename "$src" .c)
	t="$BUILD/tests/$name"
	if [ -x "$t" ]; then
		run_one "$name" "$t"
	else
		missing "$name" "$t"
	fi
done
# The fuzz targets replay their corpora (tests/fuzz/corpus/<target>); under
# `make check` that is the sanitizer build, so every input runs under ASan
# and UBSan.
for src in tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	t="$BUILD/fuzz/$name"
	corpus="tests/fuzz/corpus/${name#fuzz_}"
	if [ ! -x "$t" ]; then
		missing "$name" "$t"
	elif [ ! -d "$corpus" ]; then
		missing "$name" "$corpus"
	else
		run_one "$name" "$t" "$corpus"
	fi
done
for t in tests/integration/test_*.py; do
	[ -f "$t" ] || continue
	# Named with .py: unit and integration tests share names (test_files).
	run_one "$(basename "$t")" python3 "$t"
done

echo
[ -n "$programs_failed" ] && echo "failed programs:$programs_failed"
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
	exit 1
fi
exit 0

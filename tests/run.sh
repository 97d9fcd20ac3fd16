#!/bin/sh
# Runs every test program: the unit tests in $BUILD/tests and the
# integration tests in tests/integration (real deskboxd, real containers).
# Each prints TAP; this counts the assertions and prints the closing line
# "N passed, N failed, N skipped".  Exit 77 from a program is a skip.
set -u
BUILD=${BUILD:-build}
export DESKBOX_BUILD="$(cd "$BUILD" && pwd)"
cd "$(dirname "$0")/.."
LOGDIR="$BUILD/test-logs"
mkdir -p "$LOGDIR"

passed=0 failed=0 skipped=0 programs_failed=""
run_one() {
	name=$1
	shift
	log="$LOGDIR/$name.log"
	start=$(date +%s)
	"$@" >"$log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	if [ "$rc" -eq 77 ]; then
		skipped=$((skipped + 1))
		echo "SKIP $name: $(grep -m1 'SKIP' "$log" | sed 's/.*SKIP *//')"
		return
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		failed=$((failed + 1))
	fi
	if [ "$rc" -ne 0 ]; then
		programs_failed="$programs_failed $name"
		echo "FAIL $name ($p ok, $f not ok, exit $rc, ${secs}s)"
		grep -E '^not ok|^#' "$log" | head -40 | sed 's/^/    /'
		tail -15 "$log" | grep -vE '^(ok|not ok|#)' | sed 's/^/    | /'
	else
		echo "ok   $name ($p ok, ${secs}s)"
	fi
}

for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	run_one "$(basename "$t")" "$t"
done
for t in "$BUILD"/fuzz/fuzz_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	run_one "$name" "$t" "tests/fuzz/corpus/${name#fuzz_}"
done
for t in tests/integration/test_*.py; do
	[ -f "$t" ] || continue
	run_one "$(basename "$t" .py)" python3 "$t"
done

echo
[ -n "$programs_failed" ] && echo "failed programs:$programs_failed"
echo "$passed passed, $failed failed, $skipped skipped"
if [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
	exit 1
fi
exit 0

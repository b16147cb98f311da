#!/usr/bin/env bash
# Runs the e2e suite as E2E_SHARDS concurrent processes of one test binary.
# Most of an e2e test's time is spent waiting on the engine's windows, not
# on the CPU, so two shards on two cores take about half the wall time.
# Tests are dealt to the shards longest first (durations.txt: name and
# seconds from a recent run; a test not listed counts 30 s), so the shards
# end together. Each shard's verbose log is in _output/e2e-shard-N.log; a
# failing shard's log is printed whole.
#
# Usage: test/e2e/shards.sh [run-regex]   (env: E2E_SHARDS, E2E_TIMEOUT)
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
shards=${E2E_SHARDS:-2}
run=${1:-.}
out=$root/_output
mkdir -p "$out"
rm -f "$out"/e2e-shard-*.log
bin=$out/e2e.test
go test -tags e2e -c -o "$bin" .

mapfile -t tests < <("$bin" -test.list "$run" | grep '^Test')
if [ ${#tests[@]} -eq 0 ]; then
  echo "e2e: no test matches $run"; exit 1
fi
# Deal the tests longest first to the shard with the least time so far.
mapfile -t plan < <(printf '%s\n' "${tests[@]}" | awk -v n="$shards" '
  FNR == NR { secs[$1] = $2; next }
  { t = ($1 in secs) ? secs[$1] : 30; print t, $1 }' durations.txt - |
  sort -k1,1nr -k2 | awk -v n="$shards" '
  { best = 0; for (i = 1; i < n; i++) if (load[i] < load[best]) best = i
    load[best] += $1; names[best] = names[best] (names[best] ? "|" : "") $2 }
  END { for (i = 0; i < n; i++) if (names[i]) print names[i] }')

start=$(date +%s)
pids=()
for i in "${!plan[@]}"; do
  n=$(tr '|' '\n' <<<"${plan[$i]}" | wc -l)
  echo "e2e: shard $i runs $n tests"
  "$bin" -test.count=1 -test.v -test.timeout "${E2E_TIMEOUT:-60m}" -test.run "^(${plan[$i]})\$" \
    >"$out/e2e-shard-$i.log" 2>&1 &
  pids+=($!)
done
failed=0
for i in "${!pids[@]}"; do
  if wait "${pids[$i]}"; then
    echo "e2e: shard $i passed"
  else
    echo "e2e: shard $i FAILED; its log:"; cat "$out/e2e-shard-$i.log"; failed=1
  fi
done
grep -h -E '^--- (PASS|FAIL|SKIP)' "$out"/e2e-shard-*.log | sort -t'(' -k2 -rn || true
echo "e2e: ${#tests[@]} tests in $shards shards took $(( $(date +%s) - start ))s"
exit $failed

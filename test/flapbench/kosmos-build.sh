#!/usr/bin/env bash
# Builds Kosmos's clustertree cluster-manager, the flap benchmark's Kosmos
# contestants, from a Kosmos checkout into $2/kosmos-clustertree:
#   test/flapbench/kosmos-build.sh <KOSMOS_SRC> <BIN>
# Kosmos vendors every dependency, so the build is offline (-mod=vendor). It
# is rebuilt only when the checkout's commit (or Go) changes, stamped in
# $BIN/.versions like test/tools/build.sh. Without KOSMOS_SRC it says how to
# get the tree and exits 0: the benchmark then leaves the Kosmos contestants
# out.
set -euo pipefail

src=${1:-}
BIN=${2:?usage: kosmos-build.sh <KOSMOS_SRC> <BIN>}
if [[ -z "$src" ]]; then
  echo "kosmos: KOSMOS_SRC not set, the Kosmos contestants will be left out; to include them:"
  echo "  git clone --depth 1 --branch v0.5.5 https://github.com/kosmos-io/kosmos <dir> && make kosmos KOSMOS_SRC=<dir>"
  exit 0
fi
if ! commit=$(git -C "$src" rev-parse HEAD 2>/dev/null); then
  echo "kosmos: KOSMOS_SRC=$src is not a git checkout (the report records its commit)" >&2
  exit 1
fi
stamp="$commit $(go env GOVERSION)"
mkdir -p "$BIN/.versions"
if [[ -f "$BIN/kosmos-clustertree" && "$(cat "$BIN/.versions/kosmos-clustertree" 2>/dev/null)" == "$stamp" ]]; then
  exit 0
fi
t0=$(date +%s)
(cd "$src" && go build -mod=vendor -o "$BIN/kosmos-clustertree" ./cmd/clustertree/cluster-manager)
echo "$stamp" >"$BIN/.versions/kosmos-clustertree"
echo "kosmos: built kosmos-clustertree ($(git -C "$src" describe --tags --always) $commit) in $(( $(date +%s) - t0 ))s"

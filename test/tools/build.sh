#!/usr/bin/env bash
# Builds the real control-plane binaries leafsync's tests run, from source,
# into $BIN (default: bin/ at the repository root). A binary is rebuilt only
# when it is missing or was built from another pinned version; the pins are
# test/tools/go.mod (kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl, kubelet, kube-proxy, etcd, kwok), HELM_VERSION and COREDNS_VERSION
# below (CoreDNS: the cluster DNS of the test node's member). The test
# node's pause image is built here too (pause/, written by build/image).
set -euo pipefail

HELM_VERSION=v3.19.5
COREDNS_VERSION=v1.12.1

tools_dir=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$tools_dir/../.." && pwd)
BIN=${BIN:-$root/bin}
mkdir -p "$BIN/.versions"
cd "$tools_dir"

gover=$(go env GOVERSION)
modver() { go list -m -f '{{.Version}}' "$1"; }

# needs NAME STAMP: true when $BIN/NAME is missing or stamped otherwise.
needs() {
  [[ -f "$BIN/$1" && "$(cat "$BIN/.versions/$1" 2>/dev/null)" == "$2" ]] && return 1
  return 0
}
stamp() { echo "$2" >"$BIN/.versions/$1"; }
built() { echo "tools: built $1 ($2) in $(( $(date +%s) - $3 ))s"; }

kube=$(modver k8s.io/kubernetes)
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$kube" | cut -d. -f2)"
kube_pkgs=()
for c in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy; do
  needs "$c" "$kube $gover" && kube_pkgs+=("k8s.io/kubernetes/cmd/$c")
done
if ((${#kube_pkgs[@]})); then
  t0=$(date +%s)
  go build -o "$BIN/" -ldflags "$kube_ldflags" "${kube_pkgs[@]}"
  for p in "${kube_pkgs[@]}"; do stamp "$(basename "$p")" "$kube $gover"; done
  built "${kube_pkgs[*]##*/}" "$kube" "$t0"
fi

etcd=$(modver go.etcd.io/etcd/server/v3)
if needs etcd "$etcd $gover"; then
  t0=$(date +%s)
  go build -o "$BIN/etcd" go.etcd.io/etcd/server/v3
  stamp etcd "$etcd $gover"; built etcd "$etcd" "$t0"
fi

kwok=$(modver sigs.k8s.io/kwok)
if needs kwok "$kwok $gover"; then
  t0=$(date +%s)
  go build -o "$BIN/kwok" sigs.k8s.io/kwok/cmd/kwok
  stamp kwok "$kwok $gover"; built kwok "$kwok" "$t0"
fi
# kwok needs its Stage definitions (node start and Lease heartbeat, pod
# ready/complete/delete); they ship in the module source.
stages=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
{
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"; cat "$stages/$f"
  done
} >"$BIN/kwok-stages.yaml.tmp" && mv "$BIN/kwok-stages.yaml.tmp" "$BIN/kwok-stages.yaml"

if needs helm "$HELM_VERSION $gover"; then
  t0=$(date +%s)
  GOBIN="$BIN" GOFLAGS=-mod=mod go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  stamp helm "$HELM_VERSION $gover"; built helm "$HELM_VERSION" "$t0"
fi

if needs coredns "$COREDNS_VERSION $gover"; then
  t0=$(date +%s)
  GOBIN="$BIN" GOFLAGS=-mod=mod go install "github.com/coredns/coredns@$COREDNS_VERSION"
  stamp coredns "$COREDNS_VERSION $gover"; built coredns "$COREDNS_VERSION" "$t0"
fi

# The pause image of the test node's pods: a static program that waits for
# a signal, on an empty base, so that the node never pulls an image.
pause_src=$(cat pause/main.go ../../build/image/main.go | sha256sum | cut -c1-16)
if needs pause-image.tar "$pause_src $gover"; then
  t0=$(date +%s)
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN/pause" ./pause
  (cd ../../build/image && go run . -binary "$BIN/pause" -name pause -cmd "" -out "$BIN/pause-image.tar" \
     -arch "$(go env GOARCH)" -version 3.10 -ref leafsync.local/pause:3.10)
  stamp pause-image.tar "$pause_src $gover"; built pause-image.tar "local" "$t0"
fi

echo "tools: up to date in $BIN"

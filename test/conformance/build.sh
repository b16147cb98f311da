#!/usr/bin/env bash
# Builds what the conformance run needs, into $BIN (default: bin/ at the
# repository root), each only when missing or built from another pin:
#   e2e.test        Kubernetes' e2e suite at the k8s.io/kubernetes version
#                   pinned in suite/go.mod (built like the project's
#                   kube-apiserver, so most packages come from the cache)
#   conformance-images/*.tar
#                   the test images the in-scope specs run, as OCI archives
#                   named as the suite expects (test/utils/image/manifest.go),
#                   written by build/image's rootfs mode: busybox from
#                   Debian's busybox-static with Debian's bash-static as
#                   sh and bash, agnhost and nonewprivs from their Go
#                   source, pause from test/tools/pause.
# The test node imports the archives into containerd; nothing is pulled.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/bin}
BUSYBOX=${BUSYBOX:-/bin/busybox}
BASH_STATIC=${BASH_STATIC:-/bin/bash-static}
out=$BIN/conformance-images
mkdir -p "$BIN/.versions" "$out"
cd "$here/suite"

gover=$(go env GOVERSION)
arch=$(go env GOARCH)
kube=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
needs() {
  [[ -f "$BIN/$1" && "$(cat "$BIN/.versions/${1//\//_}" 2>/dev/null)" == "$2" ]] && return 1
  return 0
}
stamp() { echo "$2" >"$BIN/.versions/${1//\//_}"; }
built() { echo "conformance: built $1 in $(($(date +%s) - $2))s"; }

# The suite, with the version stamp upstream's build gives it (the
# framework compares it with the server's).
if needs e2e.test "$kube $gover"; then
  t0=$(date +%s)
  go test -c -o "$BIN/e2e.test" \
    -ldflags "-X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$kube" | cut -d. -f2)" \
    k8s.io/kubernetes/test/e2e
  stamp e2e.test "$kube $gover"; built "e2e.test $kube" "$t0"
fi

for b in "$BUSYBOX" "$BASH_STATIC"; do
  [[ -x $b ]] || { echo "conformance: $b missing: Debian's busybox-static and bash-static (make conformance-packages)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# busybox_tree FILE: the rootfs lines of a busybox userland: the static
# binary, a link per applet in /bin, /tmp, and the users and groups. sh is
# bash: busybox 1.35's ash drops the variables whose names are not shell
# identifiers (data-1, from envFrom) from the environment it passes on,
# where upstream's busybox 1.37 keeps them, and the suite's specs `sh -c
# env` to read them; bash keeps them.
busybox_tree() {
  {
    echo "dir /bin 0755 0:0"
    echo "file /bin/busybox 0755 0:0 $BUSYBOX"
    echo "file /bin/bash 0755 0:0 $BASH_STATIC"
    echo "symlink /bin/sh bash"
    for a in $("$BUSYBOX" --list); do [[ $a == busybox || $a == sh ]] || echo "symlink /bin/$a busybox"; done
    echo "dir /tmp 1777 0:0"
    echo "dir /root 0700 0:0"
    echo "dir /etc 0755 0:0"
    echo "file /etc/passwd 0644 0:0 $work/passwd"
    echo "file /etc/group 0644 0:0 $work/group"
  } >"$1"
}
cat >"$work/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh
PASSWD
cat >"$work/group" <<'GROUP'
root:x:0:
user-defined-in-image:x:1000:
group-defined-in-image:x:50000:user-defined-in-image
nogroup:x:65534:
GROUP

path_env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
image() { # image NAME REF SPEC ARGS...: writes $out/NAME.tar
  local name=$1 ref=$2 spec=$3; shift 3
  (cd "$root/build/image" && go run . -rootfs "$spec" -name "$name" -ref "$ref" -out "$out/$name.tar" \
     -arch "$arch" -version "${ref##*:}" -user "" -env "$path_env" "$@")
}
# Every image is rebuilt when any of its inputs changes: the pin, busybox,
# this script, the shims, the image writer.
src=$( { echo "$kube $gover"; cat "$BUSYBOX" "$BASH_STATIC" "$here/build.sh" "$here"/images/* "$root"/build/image/*.go "$root"/test/tools/pause/main.go; } | sha256sum | cut -c1-16)
if needs conformance-images/busybox.tar "$src"; then
  t0=$(date +%s)
  busybox_tree "$work/busybox"
  image busybox registry.k8s.io/e2e-test-images/busybox:1.37.0-1 "$work/busybox" -cmd sh

  # agnhost: upstream's is Alpine with bash and curl; here the busybox tree
  # (with bash) and a curl shim (images/curl). nginx (the Pod Generation specs only run
  # it) is agnhost under nginx's name: those specs need a running pod only.
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/agnhost" k8s.io/kubernetes/test/images/agnhost
  busybox_tree "$work/agnhost.rootfs"
  {
    echo "file /agnhost 0755 0:0 $work/agnhost"
    echo "symlink /agnhost-2 agnhost"
    echo "dir /uploads 0755 0:0"
    echo "dir /usr 0755 0:0"
    echo "dir /usr/bin 0755 0:0"
    echo "file /usr/bin/curl 0755 0:0 $here/images/curl"
    echo "dir /home 0755 0:0"
    echo "dir /home/user-defined-in-image 0755 1000:1000"
  } >>"$work/agnhost.rootfs"
  for ref in agnhost:2.63.0 agnhost:2.55 nginx:1.15-4; do
    image "${ref//[:.]/-}" "registry.k8s.io/e2e-test-images/$ref" "$work/agnhost.rootfs" -entrypoint /agnhost -cmd pause
  done

  # nautilus and kitten (kubectl's Update Demo): agnhost serving a picture
  # and data.json from its working directory, as upstream's Dockerfiles say;
  # tagged as the suite's manifest names them (the sources' VERSION files
  # are ahead of it).
  imgsrc=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images
  for demo in nautilus kitten; do
    cp "$work/agnhost.rootfs" "$work/$demo.rootfs"
    echo "file /$demo.jpg 0644 0:0 $imgsrc/$demo/html/$demo.jpg" >>"$work/$demo.rootfs"
    echo "file /data.json 0644 0:0 $imgsrc/$demo/html/data.json" >>"$work/$demo.rootfs"
    image "$demo" "registry.k8s.io/e2e-test-images/$demo:1.8" "$work/$demo.rootfs" -entrypoint /agnhost -cmd test-webserver
  done

  # nonewprivs: nnp, setuid root, on busybox.
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/nnp" k8s.io/kubernetes/test/images/nonewprivs
  busybox_tree "$work/nnp.rootfs"
  {
    echo "dir /usr 0755 0:0"
    echo "dir /usr/local 0755 0:0"
    echo "dir /usr/local/bin 0755 0:0"
    echo "file /usr/local/bin/nnp 4755 0:0 $work/nnp"
  } >>"$work/nnp.rootfs"
  image nonewprivs registry.k8s.io/e2e-test-images/nonewprivs:1.4 "$work/nnp.rootfs" -cmd nnp

  # pause: the project's, under the suite's name.
  (cd "$root/test/tools" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/pause" ./pause)
  (cd "$root/build/image" && go run . -binary "$work/pause" -name pause -cmd "" -out "$out/pause.tar" \
     -arch "$arch" -version 3.10.2 -ref registry.k8s.io/pause:3.10.2)
  stamp conformance-images/busybox.tar "$src"; built "the test images" "$t0"
fi
echo "conformance: up to date in $BIN"

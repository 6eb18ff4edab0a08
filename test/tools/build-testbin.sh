#!/usr/bin/env bash
# Builds the test-only binaries for real member clusters into $1 (default
# ../../.testbin): kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl (for end-to-end tests against the hub), kubelet and kube-proxy (for
# real nodes beside the KWOK ones), etcd, kwok, and the KWOK stages file; and
# chartrender (renders the Helm charts with the Helm Go SDK), helmrelease
# (helm install, upgrade and uninstall with the SDK), images (packs a static
# binary as an OCI image tarball), pause.tar (the real nodes' sandbox image),
# web.tar (their workload: an HTTP server) and promtool (Prometheus' rule
# checker, its own module in promtool/), rebuilt incrementally on every run
# (seconds when warm) so editing them, or the small_tools function, does not
# invalidate the cached Kubernetes binaries.
#
# Idempotent and fast when warm: the output folder remembers the key (a hash
# of this module's go.mod/go.sum, this script but small_tools, and the Go
# version) it was built for, and finished builds are kept under
# $FLOTILLA_TESTBIN_CACHE (default ~/.cache/flotilla/testbin) so a fresh
# clone on the same machine copies them instead of spending ~10 minutes
# compiling.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p "${1:-../../.testbin}"
out=$(cd "${1:-../../.testbin}" && pwd)
files=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy kwok kwok-stages.yaml)

step() { printf 'testbin: %s\n' "$*" >&2; }
complete() { local f; for f in "${files[@]}"; do [[ -s "$1/$f" ]] || return 1; done; }

key=$( { cat go.mod go.sum cmd/kwok-stages/main.go; sed '/^small_tools() {$/,/^}$/d' build-testbin.sh; go version; } | sha256sum | cut -c1-16)
small_tools() {
	step "chartrender"
	go build -o "$out/chartrender.tmp" ./cmd/chartrender && mv -f "$out/chartrender.tmp" "$out/chartrender"
	step "helmrelease"
	go build -o "$out/helmrelease.tmp" ./cmd/helmrelease && mv -f "$out/helmrelease.tmp" "$out/helmrelease"
	step "images, and the pause image of real nodes (pause.tar)"
	go build -o "$out/images.tmp" ./cmd/images && mv -f "$out/images.tmp" "$out/images"
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/pause" ./cmd/pause
	"$out/images" --binary "$out/pause" --repository registry.k8s.io/pause --tag 3.10 \
		--description "pause: the sandbox of the test clusters' real nodes" --out "$out/pause.tar"
	step "the web server image of real nodes' workloads (web.tar)"
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/webserver" ./cmd/webserver
	"$out/images" --binary "$out/webserver" --repository flotilla.test/web --tag 1 \
		--description "webserver: a workload that answers with its pod and node" --out "$out/web.tar"
	step "promtool (cold: about 5 minutes)"
	go build -C promtool -o "$out/promtool.tmp" github.com/prometheus/prometheus/cmd/promtool && mv -f "$out/promtool.tmp" "$out/promtool"
}

if [[ "$(cat "$out/.key" 2>/dev/null)" == "$key" ]] && complete "$out"; then
	step "up to date in $out (key $key)"
	small_tools
	exit 0
fi
cache_root=${FLOTILLA_TESTBIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/flotilla/testbin}
cache="$cache_root/$key"
if complete "$cache"; then
	step "copying cached build $key to $out"
	for f in "${files[@]}"; do cp -f "$cache/$f" "$out/$f.tmp" && mv -f "$out/$f.tmp" "$out/$f"; done
	echo "$key" >"$out/.key"
	small_tools
	exit 0
fi

k8s_version=v1.37.2
build_date=$(date -u -d @"${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=37"
	k8s_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

rm -f "$out/.key"
started=$SECONDS
step "kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy (cold: about 11 minutes on 2 cores, a few more for kubelet and kube-proxy)"
go build -ldflags "$k8s_ldflags" -o "$out/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kubectl \
	k8s.io/kubernetes/cmd/kubelet \
	k8s.io/kubernetes/cmd/kube-proxy
step "etcd"
go build -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=v3.7.0" -o "$out/etcd" go.etcd.io/etcd/server/v3
step "kwok"
go build -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=0.8.0" -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok
step "kwok stages"
go run ./cmd/kwok-stages >"$out/kwok-stages.yaml.tmp"
mv -f "$out/kwok-stages.yaml.tmp" "$out/kwok-stages.yaml"
echo "$key" >"$out/.key"
step "built in $((SECONDS - started)) s into $out"

# Keep this build for fresh clones; drop builds for other keys.
mkdir -p "$cache_root"
rm -rf "$cache.tmp"
mkdir "$cache.tmp"
for f in "${files[@]}"; do cp "$out/$f" "$cache.tmp/$f"; done
find "$cache_root" -mindepth 1 -maxdepth 1 ! -name "$key.tmp" -exec rm -rf {} +
mv "$cache.tmp" "$cache"
step "cached as $cache"
small_tools

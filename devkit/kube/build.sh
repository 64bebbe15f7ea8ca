#!/usr/bin/env bash
# Builds the real Kubernetes + Kueue stack idleshare's tests run against, from the versions pinned in this
# folder's go.mod / go.sum, into a cache outside the repository:
#
#   ${IDLESHARE_KUBE_CACHE:-~/.cache/idleshare/kube}/<key>/bin/{etcd,kube-apiserver,kubectl,kueue}
#   ${IDLESHARE_KUBE_CACHE:-~/.cache/idleshare/kube}/<key>/kueue/{crds/*.yaml,webhook.yaml}
#
# <key> is derived from go.mod, go.sum, cmd/ and the Go version, so a change of any pin builds anew and an
# unchanged one is skipped in milliseconds. Prints the cache directory on its last line.
#
#   bash devkit/kube/build.sh            build what is missing (prints what it builds and how long it took)
#   bash devkit/kube/build.sh --print    print the cache directory only (exit 1 when it is not built)
#   bash devkit/kube/build.sh --regen    rewrite go.mod's staging replaces from k8s.io/kubernetes' own go.mod
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

if ! command -v go >/dev/null 2>&1; then
    echo "kube stack: \`go\` is not on PATH: Go $(awk '$1 == "go" {print $2; exit}' go.mod) or later builds the pinned stack (and names its cache)" >&2
    exit 127
fi

kube_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' go.mod)"
kueue_version="$(awk '$1 == "sigs.k8s.io/kueue" && $2 ~ /^v/ {print $2; exit}' go.mod)"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' go.mod)"

if [[ "${1:-}" == "--regen" ]]; then
    dir="$(go mod download -json "k8s.io/kubernetes@${kube_version}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
    staging="v0.${kube_version#v1.}"
    awk -v sv="$staging" '
        /^replace \(/ {print; while ((getline line < "/dev/stdin") > 0) print line; skip=1; next}
        skip && /^\)/ {skip=0}
        !skip {print}' go.mod < <(grep "=> ./staging" "$dir/go.mod" | awk -v sv="$staging" '{print "\t"$1" => "$1" "sv}') > go.mod.new
    mv go.mod.new go.mod
    go mod tidy
    echo "go.mod: staging modules replaced at ${staging}"
    exit 0
fi

minor="${kube_version#v1.}"; minor="${minor%%.*}"
kube_ld="-X k8s.io/component-base/version.gitVersion=${kube_version} -X k8s.io/component-base/version.gitMajor=1"
kube_ld+=" -X k8s.io/component-base/version.gitMinor=${minor} -X k8s.io/component-base/version.gitTreeState=clean"
kube_ld+=" -X k8s.io/client-go/pkg/version.gitVersion=${kube_version} -X k8s.io/client-go/pkg/version.gitMajor=1"
kube_ld+=" -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
kueue_ld="-X sigs.k8s.io/kueue/pkg/version.GitVersion=${kueue_version}"

# What the binaries depend on: the pins, our one source file, the Go version and the link flags.
go_version="$(go env GOVERSION)"
key="$({ cat go.mod go.sum cmd/etcd/main.go; echo "$go_version $kube_ld $kueue_ld"; } | sha256sum | cut -c1-16)"
cache_root="${IDLESHARE_KUBE_CACHE:-$HOME/.cache/idleshare/kube}"
out="$cache_root/k8s-${kube_version}_kueue-${kueue_version}_etcd-${etcd_version}_${key}"
bins=(etcd kube-apiserver kubectl kueue)

complete() {
    for b in "${bins[@]}"; do [[ -x "$out/bin/$b" ]] || return 1; done
    [[ -f "$out/kueue/webhook.yaml" && -f "$out/kueue/crds/kueue.x-k8s.io_clusterqueues.yaml" ]]
}

if [[ "${1:-}" == "--print" ]]; then
    complete && { echo "$out"; exit 0; }
    exit 1
fi

if complete; then
    echo "kube stack: cached (Kubernetes ${kube_version}, Kueue ${kueue_version}, etcd ${etcd_version})" >&2
    echo "$out"
    exit 0
fi

mkdir -p "$out/bin" "$out/kueue/crds"
started=$SECONDS
# -mod=readonly: go.sum is the pin; a build never rewrites it.
export GOFLAGS="-mod=readonly ${GOFLAGS:-}"
echo "kube stack: downloading modules (Kubernetes ${kube_version}, Kueue ${kueue_version}, etcd ${etcd_version})" >&2
go mod download

build() { # name package ldflags...
    local name="$1" pkg="$2" ldflags="$3" t0=$SECONDS
    if [[ -x "$out/bin/$name" ]]; then return 0; fi
    echo "kube stack: building $name ($pkg) ..." >&2
    go build -trimpath -ldflags "-s -w $ldflags" -o "$out/bin/$name.tmp" "$pkg"
    mv "$out/bin/$name.tmp" "$out/bin/$name"
    echo "kube stack: built $name in $((SECONDS - t0)) s ($(du -m "$out/bin/$name" | cut -f1) MB)" >&2
}

build etcd ./cmd/etcd ""
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kube_ld"
build kueue sigs.k8s.io/kueue/cmd/kueue "$kueue_ld"
build kubectl k8s.io/kubernetes/cmd/kubectl "$kube_ld"

kueue_dir="$(go mod download -json "sigs.k8s.io/kueue@${kueue_version}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
cp "$kueue_dir"/config/components/crd/bases/*.yaml "$out/kueue/crds/"
cp "$kueue_dir/config/components/webhook/manifests.yaml" "$out/kueue/webhook.yaml"
chmod -R u+w "$out/kueue"
echo "kube stack: ready in $((SECONDS - started)) s: $out" >&2
echo "$out"

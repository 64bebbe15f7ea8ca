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
# Other Kueue versions (the compatibility matrix, devkit/kube/kueue_versions.py) each have their own module set,
# kueue/<version>/{go.mod,go.sum,tools.go} (Kueue's own k8s.io pins: Kueue 0.12 cannot share Kubernetes 1.36's
# modules), built into ${cache}/kueue-<version>_<hash of that module set, Go version, link flags>/ beside the stack
# above, which they run against (its etcd, kube-apiserver and kubectl): adding a version leaves that cache valid.
#
#   bash devkit/kube/build.sh            build what is missing (prints what it builds and how long it took)
#   bash devkit/kube/build.sh --print    print the cache directory only (exit 1 when it is not built)
#   bash devkit/kube/build.sh --kueue V  also Kueue V (default: the one go.mod pins); prints the stack's
#                                        directory, then Kueue V's on the last line (the same for the default)
#   bash devkit/kube/build.sh --regen    rewrite go.mod's staging replaces from k8s.io/kubernetes' own go.mod
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

mode=build
want_kueue=""
while (($#)); do
    case "$1" in
        --print) mode=print ;;
        --regen) mode=regen ;;
        --kueue)
            [[ $# -ge 2 && -n "$2" ]] || { echo "kube stack: --kueue needs a version (e.g. --kueue v0.12.3)" >&2; exit 2; }
            want_kueue="$2"; shift ;;
        --kueue=*) want_kueue="${1#--kueue=}" ;;
        *) echo "kube stack: unknown argument '$1' (--print, --kueue VERSION, --regen)" >&2; exit 2 ;;
    esac
    shift
done

if ! command -v go >/dev/null 2>&1; then
    echo "kube stack: \`go\` is not on PATH: Go $(awk '$1 == "go" {print $2; exit}' go.mod) or later builds the pinned stack (and names its cache)" >&2
    exit 127
fi

kube_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' go.mod)"
kueue_version="$(awk '$1 == "sigs.k8s.io/kueue" && $2 ~ /^v/ {print $2; exit}' go.mod)"
etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" && $2 ~ /^v/ {print $2; exit}' go.mod)"

if [[ "$mode" == "regen" ]]; then
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

# Another Kueue than go.mod's: its own module set must be in kueue/<version>/.
if [[ -n "$want_kueue" && "$want_kueue" != "$kueue_version" ]]; then
    extra_dir="$here/kueue/$want_kueue"
    if [[ ! -f "$extra_dir/go.mod" ]]; then
        pinned="$(cd kueue 2>/dev/null && ls -d v*/ 2>/dev/null | tr -d / | tr '\n' ' ')"
        echo "kube stack: Kueue ${want_kueue} is not pinned here: no devkit/kube/kueue/${want_kueue}/go.mod (pinned: ${kueue_version} (default) ${pinned})" >&2
        exit 2
    fi
    extra_pin="$(awk '$1 == "require" && $2 == "sigs.k8s.io/kueue" {print $3; exit} $1 == "sigs.k8s.io/kueue" && $2 ~ /^v/ {print $2; exit}' "$extra_dir/go.mod")"
    if [[ "$extra_pin" != "$want_kueue" ]]; then
        echo "kube stack: devkit/kube/kueue/${want_kueue}/go.mod requires sigs.k8s.io/kueue '${extra_pin}', not ${want_kueue}" >&2
        exit 2
    fi
else
    extra_dir=""
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

if [[ -n "$extra_dir" ]]; then
    extra_ld="-X sigs.k8s.io/kueue/pkg/version.GitVersion=${want_kueue}"
    extra_key="$({ cat "$extra_dir/go.mod" "$extra_dir/go.sum" "$extra_dir/tools.go"; echo "$go_version $extra_ld"; } | sha256sum | cut -c1-16)"
    extra_out="$cache_root/kueue-${want_kueue}_${extra_key}"
fi

has_kueue() { # dir
    [[ -x "$1/bin/kueue" && -f "$1/kueue/webhook.yaml" && -f "$1/kueue/crds/kueue.x-k8s.io_clusterqueues.yaml" ]]
}

complete() {
    for b in "${bins[@]}"; do [[ -x "$out/bin/$b" ]] || return 1; done
    has_kueue "$out"
}

# The directories asked for: the stack's; with --kueue, then Kueue's (the stack's own for the default).
print_dirs() {
    echo "$out"
    if [[ -n "$extra_dir" ]]; then echo "$extra_out"; elif [[ -n "$want_kueue" ]]; then echo "$out"; fi
}

if [[ "$mode" == "print" ]]; then
    complete || exit 1
    if [[ -n "$extra_dir" ]]; then has_kueue "$extra_out" || exit 1; fi
    print_dirs
    exit 0
fi

build() { # out name package ldflags...
    local dest="$1" name="$2" pkg="$3" ldflags="$4" t0=$SECONDS
    if [[ -x "$dest/bin/$name" ]]; then return 0; fi
    echo "kube stack: building $name ($pkg) ..." >&2
    go build -trimpath -ldflags "-s -w $ldflags" -o "$dest/bin/$name.tmp" "$pkg"
    mv "$dest/bin/$name.tmp" "$dest/bin/$name"
    echo "kube stack: built $name in $((SECONDS - t0)) s ($(du -m "$dest/bin/$name" | cut -f1) MB)" >&2
}

copy_manifests() { # out version
    local dest="$1" version="$2" dir
    dir="$(go mod download -json "sigs.k8s.io/kueue@${version}" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
    cp "$dir"/config/components/crd/bases/*.yaml "$dest/kueue/crds/"
    cp "$dir/config/components/webhook/manifests.yaml" "$dest/kueue/webhook.yaml"
    chmod -R u+w "$dest/kueue"
}

# -mod=readonly: go.sum is the pin; a build never rewrites it.
export GOFLAGS="-mod=readonly ${GOFLAGS:-}"

if complete; then
    echo "kube stack: cached (Kubernetes ${kube_version}, Kueue ${kueue_version}, etcd ${etcd_version})" >&2
else
    mkdir -p "$out/bin" "$out/kueue/crds"
    started=$SECONDS
    echo "kube stack: downloading modules (Kubernetes ${kube_version}, Kueue ${kueue_version}, etcd ${etcd_version})" >&2
    go mod download

    build "$out" etcd ./cmd/etcd ""
    build "$out" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kube_ld"
    build "$out" kueue sigs.k8s.io/kueue/cmd/kueue "$kueue_ld"
    build "$out" kubectl k8s.io/kubernetes/cmd/kubectl "$kube_ld"
    copy_manifests "$out" "$kueue_version"
    echo "kube stack: ready in $((SECONDS - started)) s: $out" >&2
fi

if [[ -n "$extra_dir" ]]; then
    if has_kueue "$extra_out"; then
        echo "kube stack: cached (Kueue ${want_kueue}, from devkit/kube/kueue/${want_kueue})" >&2
    else
        mkdir -p "$extra_out/bin" "$extra_out/kueue/crds"
        started=$SECONDS
        cd "$extra_dir"
        echo "kube stack: downloading modules (Kueue ${want_kueue}, devkit/kube/kueue/${want_kueue})" >&2
        go mod download
        build "$extra_out" kueue sigs.k8s.io/kueue/cmd/kueue "$extra_ld"
        copy_manifests "$extra_out" "$want_kueue"
        cd "$here"
        echo "kube stack: Kueue ${want_kueue} ready in $((SECONDS - started)) s: $extra_out" >&2
    fi
fi
print_dirs

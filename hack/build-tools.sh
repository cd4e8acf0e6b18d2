#!/usr/bin/env bash
# Builds the Kubernetes control plane banlieue's tests and local environment
# run against, from Go modules (no downloads from anywhere else):
#   kube-apiserver, kube-controller-manager, kubectl  (k8s.io/kubernetes, pinned in hack/tools/go.mod)
#   etcd                                               (go.etcd.io/etcd/server/v3, same module)
#   clusterctl                                         (sigs.k8s.io/cluster-api, the version test/capi runs)
# and, as root (a real node needs it): kubelet and kube-scheduler (same module
# as the control plane), CoreDNS (github.com/coredns/coredns, the cluster's
# names), the node's pause image (hack/pause, packed by hack/image as
# registry.k8s.io/pause:3.10) and an etcd image (bin/etcd packed the same
# way, tagged as the shipped etcd manifest names it).
# into bin/. A binary already built for the pinned version is skipped, so the
# script is cheap to call every time. The first, cold build of kube-apiserver
# takes 10+ minutes on 2 cores; later builds reuse Go's build cache.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ROOT}/bin"
TOOLS="${ROOT}/hack/tools"
mkdir -p "${BIN}"

cd "${TOOLS}"
k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
minor="$(echo "${k8s_version}" | cut -d. -f2)"

ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${pkg}.gitVersion=${k8s_version}"
    ldflags+=" -X ${pkg}.gitMajor=1"
    ldflags+=" -X ${pkg}.gitMinor=${minor}"
    ldflags+=" -X ${pkg}.gitTreeState=clean"
done

# build NAME VERSION PACKAGE [LDFLAGS]
build() {
    local name="$1" version="$2" pkg="$3" flags="${4:-}"
    local stamp="${BIN}/.${name}.version"
    if [[ -x "${BIN}/${name}" && -f "${stamp}" && "$(cat "${stamp}")" == "${version}" ]]; then
        echo "tools: ${name} ${version} already built"
        return
    fi
    echo "tools: building ${name} ${version} (the first build of kube-apiserver takes 10+ minutes)..."
    local start=${SECONDS}
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w ${flags}" -o "${BIN}/${name}.tmp" "${pkg}"
    mv "${BIN}/${name}.tmp" "${BIN}/${name}"
    echo "${version}" > "${stamp}"
    echo "tools: built ${name} in $((SECONDS - start))s"
}

build etcd "${etcd_version}" ./etcd
build kubectl "${k8s_version}" k8s.io/kubernetes/cmd/kubectl "${ldflags}"
build kube-controller-manager "${k8s_version}" k8s.io/kubernetes/cmd/kube-controller-manager "${ldflags}"
build kube-apiserver "${k8s_version}" k8s.io/kubernetes/cmd/kube-apiserver "${ldflags}"
if [[ $(id -u) -eq 0 ]]; then
    build kube-scheduler "${k8s_version}" k8s.io/kubernetes/cmd/kube-scheduler "${ldflags}"
    build kubelet "${k8s_version}" k8s.io/kubernetes/cmd/kubelet "${ldflags}"
fi

# clusterctl at the Cluster API version whose reconcilers test/capi runs
# (a tool of that module), stamped with it as its release builds are.
cd "${ROOT}/test/capi"
capi_version="$(go list -m -f '{{.Version}}' sigs.k8s.io/cluster-api)"
build clusterctl "${capi_version}" sigs.k8s.io/cluster-api/cmd/clusterctl \
    "-X sigs.k8s.io/cluster-api/version.gitVersion=${capi_version} -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"

# CoreDNS at the version Kubernetes ${minor} ships with (kubeadm's default).
coredns_version="v1.14.6"
if [[ $(id -u) -eq 0 ]]; then
    stamp="${BIN}/.coredns.version"
    if [[ -x "${BIN}/coredns" && -f "${stamp}" && "$(cat "${stamp}")" == "${coredns_version}" ]]; then
        echo "tools: coredns ${coredns_version} already built"
    else
        echo "tools: building coredns ${coredns_version}..."
        start=${SECONDS}
        CGO_ENABLED=0 GOBIN="${BIN}" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@${coredns_version}"
        echo "${coredns_version}" > "${stamp}"
        echo "tools: built coredns in $((SECONDS - start))s"
    fi
fi

if [[ $(id -u) -eq 0 ]]; then
    cd "${ROOT}"
    # image NAME TAG BINARY ENTRYPOINT: BINARY alone in an image, as
    # bin/NAME-image.tar, rebuilt when the binary or the image builder changes.
    image() {
        local name="$1" tag="$2" binary="$3" entrypoint="$4"
        local version stamp="${BIN}/.${name}-image.tar.version"
        version="${tag} $(git hash-object "${binary}" hack/image/build/build.go | tr -d '\n')"
        if [[ -f "${BIN}/${name}-image.tar" && -f "${stamp}" && "$(cat "${stamp}")" == "${version}" ]]; then
            echo "tools: ${name}-image.tar already built"
            return
        fi
        go run ./hack/image -binary "${binary}" -entrypoint "${entrypoint}" -tag "${tag}" -out "${BIN}/${name}-image.tar"
        echo "${version}" > "${stamp}"
    }
    image etcd "registry.k8s.io/etcd:${etcd_version#v}-0" "${BIN}/etcd" /usr/local/bin/etcd
    # The pause binary is rebuilt from Go's cache each time (a second): its
    # hash says whether the image must be packed again.
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/pause" ./hack/pause
    image pause registry.k8s.io/pause:3.10 "${BIN}/pause" /pause
fi

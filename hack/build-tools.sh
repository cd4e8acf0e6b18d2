#!/usr/bin/env bash
# Builds the Kubernetes control plane banlieue's tests and local environment
# run against, from Go modules (no downloads from anywhere else):
#   kube-apiserver, kube-controller-manager, kubectl  (k8s.io/kubernetes, pinned in hack/tools/go.mod)
#   etcd                                               (go.etcd.io/etcd/server/v3, same module)
#   clusterctl                                         (sigs.k8s.io/cluster-api, the version test/capi runs)
# and, as root (a real node needs it): kubelet and kube-scheduler (same module
# as the control plane) and the node's pause image (hack/pause, packed by
# hack/image as registry.k8s.io/pause:3.10).
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

if [[ $(id -u) -eq 0 ]]; then
    cd "${ROOT}"
    pause_version="$(git hash-object hack/pause/main.go hack/image/build/build.go | tr -d '\n')"
    stamp="${BIN}/.pause-image.tar.version"
    if [[ -f "${BIN}/pause-image.tar" && -f "${stamp}" && "$(cat "${stamp}")" == "${pause_version}" ]]; then
        echo "tools: pause-image.tar already built"
    else
        CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${BIN}/pause" ./hack/pause
        go run ./hack/image -binary "${BIN}/pause" -entrypoint /pause -tag registry.k8s.io/pause:3.10 -out "${BIN}/pause-image.tar"
        echo "${pause_version}" > "${stamp}"
    fi
fi

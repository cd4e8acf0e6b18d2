#!/usr/bin/env bash
# Regenerates everything derived from pkg/apis: the protobuf encoding,
# deepcopy, defaulters, conversions, OpenAPI definitions, and the clientset
# with listers, informers and apply configurations. Generators are installed into the ignored bin/.
set -o errexit
set -o nounset
set -o pipefail

SCRIPT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${SCRIPT_ROOT}"
THIS_PKG="github.com/firestoned/banlieue"
BOILERPLATE="${SCRIPT_ROOT}/hack/boilerplate.go.txt"

export GOBIN="${SCRIPT_ROOT}/bin"
mkdir -p "${GOBIN}"

# "go list -m" names no folder for a module not yet in the module cache
# (a fresh machine): download it first.
go mod download k8s.io/code-generator
CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

# Protobuf first: it writes the field numbers into types.go's struct tags.
"${SCRIPT_ROOT}/hack/update-protobuf.sh"

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/pkg/apis"

report_args=(--report-filename "${SCRIPT_ROOT}/hack/api-rules-violations.list")
if [[ "${UPDATE_API_KNOWN_VIOLATIONS:-true}" == "true" ]]; then
    report_args+=(--update-report)
fi
kube::codegen::gen_openapi \
    --output-dir "${SCRIPT_ROOT}/pkg/generated/openapi" \
    --output-pkg "${THIS_PKG}/pkg/generated/openapi" \
    --output-model-name-file zz_generated.model_name.go \
    "${report_args[@]}" \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/pkg/apis"

# Apply configurations need the OpenAPI schema of our types (for
# server-side-apply structure); it comes from the definitions just generated.
schema="$(mktemp)"
trap 'rm -f "${schema}"' EXIT
go run ./pkg/generated/openapi/cmd/models-schema > "${schema}"

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --applyconfig-openapi-schema "${schema}" \
    --output-dir "${SCRIPT_ROOT}/pkg/generated" \
    --output-pkg "${THIS_PKG}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/pkg/apis"

# CRDs of infrastructure.banlieue.io (served by kube-apiserver, not by
# banlieue), with the Cluster API contract label from the type markers.
rm -rf "${SCRIPT_ROOT}/artifacts/crds"
go tool controller-gen crd:crdVersions=v1 \
    paths=./pkg/apis/infrastructure/... \
    output:crd:artifacts:config=artifacts/crds
# Cluster API's IPAM contract (IPAddressClaim, IPAddress), as Cluster API
# ships it: banlieue's VMs claim addresses through it and its IPPool serves it.
(cd "${SCRIPT_ROOT}/test/capi" && go mod download sigs.k8s.io/cluster-api)
capi="$(cd "${SCRIPT_ROOT}/test/capi" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
for crd in ipaddressclaims ipaddresses; do
    install -m 0644 "${capi}/core/config/crd/bases/ipam.cluster.x-k8s.io_${crd}.yaml" "${SCRIPT_ROOT}/artifacts/crds/"
done

# clusterctl's provider repository (infrastructure-components.yaml, metadata,
# cluster templates), rendered from the CRDs above, artifacts/capi and the
# providers' manifests in artifacts/deploy.
(cd "${SCRIPT_ROOT}" && go run ./hack/clusterctl-repo -out artifacts/clusterctl)

# The names of libvirt's remote procedures, by which the libvirt provider
# counts the RPCs it sends (go-libvirt keeps its constants internal).
(cd "${SCRIPT_ROOT}" && go run ./hack/libvirt-procedures -out pkg/providers/libvirt/procedures.go)

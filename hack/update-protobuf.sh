#!/usr/bin/env bash
# Generates the protobuf encoding of banlieue.io/v1alpha1 (generated.proto
# and generated.pb.go beside types.go) with k8s.io/code-generator's
# go-to-protobuf, as Kubernetes does for its own groups. Field numbers are
# kept in types.go's protobuf struct tags: they are API, never renumbered.
# protoc comes from Debian's protobuf-compiler (installed here when
# missing and running as root, as CI does).
set -o errexit
set -o nounset
set -o pipefail

SCRIPT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${SCRIPT_ROOT}"
THIS_PKG="github.com/firestoned/banlieue"

if ! command -v protoc >/dev/null; then
    if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null; then
        echo "protobuf: installing protoc (Debian protobuf-compiler)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends protobuf-compiler >/dev/null
    else
        echo "protobuf: protoc is missing: apt-get install protobuf-compiler" >&2
        exit 1
    fi
fi

export GOBIN="${SCRIPT_ROOT}/bin"
mkdir -p "${GOBIN}"
go install golang.org/x/tools/cmd/goimports \
    k8s.io/code-generator/cmd/go-to-protobuf \
    k8s.io/code-generator/cmd/go-to-protobuf/protoc-gen-gogo
export PATH="${GOBIN}:${PATH}"

# protoc resolves imports by Go import path: a tree of the packages the
# .proto files name (ours, apimachinery's, gogoproto).
tree="$(mktemp -d)"
trap 'rm -rf "${tree}"' EXIT
mkdir -p "${tree}/github.com/firestoned" "${tree}/k8s.io" "${tree}/github.com/gogo"
ln -s "${SCRIPT_ROOT}" "${tree}/${THIS_PKG}"
ln -s "$(go list -m -f '{{.Dir}}' k8s.io/apimachinery)" "${tree}/k8s.io/apimachinery"
gogo="$(go list -m -f '{{.Dir}}' github.com/gogo/protobuf)"
ln -s "${gogo}" "${tree}/github.com/gogo/protobuf"

# apimachinery's packages are read ("-": not regenerated), ours generated.
go-to-protobuf \
    --go-header-file "${SCRIPT_ROOT}/hack/boilerplate.go.txt" \
    --output-dir "${tree}" \
    --proto-import "${tree}" \
    --proto-import "${gogo}/protobuf" \
    --packages "${THIS_PKG}/pkg/apis/banlieue/v1alpha1" \
    --apimachinery-packages "-k8s.io/apimachinery/pkg/util/intstr,-k8s.io/apimachinery/pkg/api/resource,-k8s.io/apimachinery/pkg/runtime/schema,-k8s.io/apimachinery/pkg/runtime,-k8s.io/apimachinery/pkg/apis/meta/v1"

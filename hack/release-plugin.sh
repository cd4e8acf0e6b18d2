#!/usr/bin/env bash
# Builds the kubectl banlieue plugin's release archives, one per platform
# krew installs it on (bin/release/kubectl-banlieue_VERSION_OS_ARCH.tar.gz,
# each holding the static binary kubectl-banlieue), and fills the krew
# manifest template artifacts/krew/banlieue.yaml with VERSION and their
# sha256 digests into bin/release/banlieue.yaml.
#
#   hack/release-plugin.sh VERSION
set -o errexit
set -o nounset
set -o pipefail

VERSION="${1:?usage: $0 VERSION}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/bin/release"
GO="${GO:-go}"
mkdir -p "${OUT}"
manifest="$(sed "s/{{VERSION}}/${VERSION}/g" "${ROOT}/artifacts/krew/banlieue.yaml")"
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
    os="${platform%/*}" arch="${platform#*/}"
    work="$(mktemp -d)"
    CGO_ENABLED=0 GOOS="${os}" GOARCH="${arch}" "${GO}" build -trimpath -ldflags="-s -w" \
        -o "${work}/kubectl-banlieue" "${ROOT}/cmd/kubectl-banlieue"
    archive="${OUT}/kubectl-banlieue_${VERSION}_${os}_${arch}.tar.gz"
    tar -C "${work}" -czf "${archive}" kubectl-banlieue
    rm -rf "${work}"
    sum="$(sha256sum "${archive}" | cut -d' ' -f1)"
    manifest="${manifest//\{\{SHA256_${os}_${arch}\}\}/${sum}}"
    echo "${archive} ${sum}"
done
# The header says the file is a template; the filled one is not.
printf '%s\n' "${manifest}" | sed '/^# /d' > "${OUT}/banlieue.yaml"
if grep -q '{{' "${OUT}/banlieue.yaml"; then
    echo "release-plugin: placeholders left in ${OUT}/banlieue.yaml" >&2
    exit 1
fi
echo "${OUT}/banlieue.yaml"

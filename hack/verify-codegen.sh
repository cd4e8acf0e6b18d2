#!/usr/bin/env bash
# Fails when generated code is stale: regenerates into a scratch copy of the
# repository and compares it with the committed files.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$(mktemp -d)"
trap 'rm -rf "${SCRATCH}"' EXIT

# Everything but build output and VCS data.
tar -C "${ROOT}" --exclude=./bin --exclude=./.git --exclude=./.banlieue --exclude=./_output -cf - . | tar -C "${SCRATCH}" -xf -
# kube_codegen.sh deletes every file it generated before generating again,
# so files that should no longer exist show up in the comparison too.
"${SCRATCH}/hack/update-codegen.sh" >/dev/null

status=0
for path in pkg artifacts/crds artifacts/clusterctl hack/api-rules-violations.list; do
    if ! diff -ruN "${ROOT}/${path}" "${SCRATCH}/${path}" >"${SCRATCH}/diff.txt"; then
        echo "Generated code under ${path} is out of date. Run 'make generate' and commit the result:" >&2
        head -50 "${SCRATCH}/diff.txt" >&2
        status=1
    fi
done
[[ ${status} -eq 0 ]] && echo "Generated code is up to date."
exit ${status}

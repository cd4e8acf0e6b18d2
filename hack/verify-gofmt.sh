#!/usr/bin/env bash
# Fails when any Go file is not gofmt-formatted.
set -o errexit
set -o nounset
set -o pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
bad="$(gofmt -l $(git ls-files --cached --others --exclude-standard '*.go'))"
if [[ -n "${bad}" ]]; then
    echo "These files need gofmt -w:" >&2
    echo "${bad}" >&2
    exit 1
fi
echo "gofmt: all files formatted."

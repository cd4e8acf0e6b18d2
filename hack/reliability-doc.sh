#!/usr/bin/env bash
# Copies the reliability tables the last passing runs left in bin/ to the
# committed docs/: bin/reliability.md (make test: make test-e2e and make
# test-reliability) to docs/reliability.md, and bin/reliability-long.md
# (make test-long) to docs/reliability-long.md. The tests never write docs/
# themselves, so that make test leaves the tracked tree as it found it.
#
# A table is copied only whole: it must hold rows of both packages that
# record them (test/reliability and test/e2e/vsphere), or the committed
# doc would lose one package's figures.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
copied=0
for name in reliability reliability-long; do
    src="${ROOT}/bin/${name}.md"
    [[ -f "${src}" ]] || continue
    for owner in reliability vsphere; do
        if ! grep -q "| \`${owner}\.Test" "${src}"; then
            echo "reliability-doc: ${src} has no row of ${owner}; run its tests (make test or make test-long) first" >&2
            exit 1
        fi
    done
    cp "${src}" "${ROOT}/docs/${name}.md"
    echo "reliability-doc: docs/${name}.md from bin/${name}.md"
    copied=$((copied + 1))
done
if [[ "${copied}" == 0 ]]; then
    echo "reliability-doc: no table in bin/; make test (or make test-reliability and make test-e2e) writes bin/reliability.md, make test-long bin/reliability-long.md" >&2
    exit 1
fi

#!/usr/bin/env bash
# Runs banlieue locally on embedded defaults: the API server in standalone
# mode on an embedded etcd whose data stays in .banlieue/ (a restart keeps
# your objects), with an administrator kubeconfig written next to it.
# Ctrl-C stops everything.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="${ROOT}/.banlieue"
PORT="${BANLIEUE_PORT:-8443}"
mkdir -p "${STATE}"

cat <<MSG
banlieue: serving banlieue.io/v1alpha1 on https://127.0.0.1:${PORT} (data in ${STATE}/etcd)

  export KUBECONFIG=${STATE}/kubeconfig
  kubectl apply -f artifacts/examples/vmclass.yaml -f artifacts/examples/vmimage.yaml
  kubectl get --raw /apis/banlieue.io/v1alpha1 | head

(kubectl: bin/kubectl after 'make tools'.) Ctrl-C to stop.
MSG

exec "${ROOT}/bin/banlieue" apiserver \
    --standalone \
    --standalone-kubeconfig="${STATE}/kubeconfig" \
    --bind-address=127.0.0.1 \
    --secure-port="${PORT}" \
    --embedded-etcd-data-dir="${STATE}/etcd"

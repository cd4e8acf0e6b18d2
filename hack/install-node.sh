#!/usr/bin/env bash
# Installs what a real node of the local control plane runs on besides the
# kubelet (which hack/build-tools.sh builds from Go modules), from Debian
# packages only: containerd (the CRI runtime), runc, the CNI plugins (a
# bridge network for pods), conntrack, and yq (the guides' own commands pipe
# through it, and the tests run them as written). Idempotent and quiet when
# everything is there. Needs root (apt-get); otherwise it prints the one
# command to run and fails, and the local environment keeps running
# banlieue's Deployments as processes.
set -o errexit
set -o nounset
set -o pipefail

packages=(containerd runc containernetworking-plugins conntrack iptables iproute2 yq)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("${p}")
    fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -ne 0 ]]; then
    echo "install-node: missing Debian packages; as root run:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
echo "install-node: installing ${missing[*]} ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-node: done"

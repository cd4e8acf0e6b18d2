#!/usr/bin/env bash
# Installs what the libvirt backend's tests and `make run` use, from Debian
# packages only: libvirtd and QEMU (software emulation; /dev/kvm is not
# relied on), qemu-img, and the tools hack/build-guest-image.sh builds the
# test guest with. Idempotent and quiet when everything is there. Needs root
# (apt-get); otherwise it prints the one command to run and fails.
set -o errexit
set -o nounset
set -o pipefail

packages=(
    libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
    qemu-system-x86 qemu-utils
    # The guest image (hack/build-guest-image.sh; it downloads the kernel .deb
    # itself, unpacked, not installed): busybox,
    # a syslinux-booted FAT disk, and the NoCloud seed ISO.
    busybox-static cpio kmod fdisk
    syslinux syslinux-common mtools dosfstools genisoimage
    # The installer ISO (hack/build-installer-iso.sh): its BIOS (isolinux)
    # and UEFI (systemd-boot) boot loaders.
    isolinux systemd-boot-efi
    # Guest networks inside the test's network namespace (libvirt writes its
    # network's firewall rules there, in that namespace only).
    iproute2 dnsmasq-base iptables
    # UEFI firmware and the vTPM emulator.
    ovmf swtpm swtpm-tools
)

# As root, libvirtd's QEMU driver fails to load unless its default user and
# group (libvirt-qemu, both) exist before it reads qemu.conf (which then says
# root): "Failed to parse group 'libvirt-qemu'" otherwise. Each is made when
# missing, so a machine with the user but not the group is mended too.
ensure_user() {
    [[ $(id -u) -eq 0 ]] || return 0
    getent group kvm >/dev/null || groupadd -r kvm
    getent group libvirt-qemu >/dev/null || groupadd -r libvirt-qemu
    getent passwd libvirt-qemu >/dev/null || useradd -r -M -g libvirt-qemu -G kvm -s /usr/sbin/nologin libvirt-qemu
}

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("${p}")
    fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
    ensure_user
    exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
    echo "install-libvirt: missing Debian packages; as root run:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi
echo "install-libvirt: installing ${missing[*]} ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
ensure_user
echo "install-libvirt: done"

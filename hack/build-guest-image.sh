#!/usr/bin/env bash
# Builds the test guest the libvirt backend's tests boot, from Debian
# packages only (hack/install-libvirt.sh installs the tools): Debian's
# kernel (its .deb downloaded and unpacked, not installed) and a busybox
# initramfs whose init (hack/guest/init) reads the NoCloud seed, runs the
# user data, applies the network config and reports it all on the serial
# console. The disk is a 32 MiB raw image with one FAT partition booted by
# syslinux, converted to qcow2: a ≈ 10 MB base image for copy-on-write
# overlays. Nothing is mounted, so no privilege is needed beyond reading.
#
#   hack/build-guest-image.sh OUTPUT.qcow2
#
# The image is rebuilt only when this script, the init or the kernel changes.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: build-guest-image.sh OUTPUT.qcow2}"
work="$(dirname "${out}")/guest-build"
mkdir -p "${work}"

kpkg="$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')"
[[ -n "${kpkg}" ]] || { echo "build-guest-image: no linux-image-amd64 in apt's lists (run apt-get update)" >&2; exit 1; }
stamp="$(cat "${BASH_SOURCE[0]}" "${ROOT}/hack/guest/init" | sha256sum | cut -c1-16)-${kpkg}"
if [[ -f "${out}" && -f "${out}.stamp" && "$(cat "${out}.stamp")" == "${stamp}" ]]; then
    exit 0
fi
echo "build-guest-image: building ${out} (${kpkg})..."

# The kernel and its modules, unpacked from the .deb.
if [[ ! -d "${work}/kernel-${kpkg}" ]]; then
    (cd "${work}" && rm -f "${kpkg}"_*.deb && apt-get download -q "${kpkg}" 2>&1 | grep -v "unsandboxed" || true)
    rm -rf "${work}/kernel.tmp" && mkdir -p "${work}/kernel.tmp"
    dpkg-deb -x "${work}/${kpkg}"_*.deb "${work}/kernel.tmp"
    mv "${work}/kernel.tmp" "${work}/kernel-${kpkg}"
fi
kroot="${work}/kernel-${kpkg}"
kver="${kpkg#linux-image-}"
depmod -b "${kroot}" "${kver}"

# The initramfs: busybox, the init, and the modules in dependency order.
rd="${work}/initramfs"
rm -rf "${rd}" && mkdir -p "${rd}/bin" "${rd}/etc" "${rd}/lib/modules"
cp /bin/busybox "${rd}/bin/busybox"
install -m 0755 "${ROOT}/hack/guest/init" "${rd}/init"
cat > "${rd}/etc/udhcpc.script" <<'SCRIPT'
#!/bin/sh
case "$1" in
bound|renew)
    ip addr flush dev "$interface"
    ip addr add "$ip/${mask:-24}" dev "$interface"
    [ -n "$router" ] && ip route add default via "${router%% *}" dev "$interface"
    ;;
esac
SCRIPT
chmod +x "${rd}/etc/udhcpc.script"
modules="scsi_common scsi_mod libata ata_piix libahci ahci cdrom sr_mod crct10dif_common crc64
 crct10dif_generic crc-t10dif crc64-rocksoft t10-pi sd_mod virtio_ring virtio virtio_pci_modern_dev
 virtio_pci_legacy_dev virtio_pci virtio_blk virtio_scsi failover net_failover virtio_net e1000
 isofs fat vfat nls_cp437 nls_ascii button evdev qemu_fw_cfg"
: > "${rd}/etc/modules.order"
for m in ${modules}; do
    for path in $(modprobe -d "${kroot}" -S "${kver}" --show-depends "${m}" | awk '/^insmod/{print $2}'); do
        base="$(basename "${path}")"
        if [[ ! -f "${rd}/lib/modules/${base}" ]]; then
            cp "${path}" "${rd}/lib/modules/${base}"
            echo "${base}" >> "${rd}/etc/modules.order"
        fi
    done
done
(cd "${rd}" && find . | cpio -o -H newc --quiet | gzip -9) > "${work}/initrd.gz"

# The boot disk: MBR + one bootable FAT16 partition at 1 MiB.
raw="${work}/disk.raw"
rm -f "${raw}" && truncate -s 32M "${raw}"
echo 'start=2048, type=6, bootable' | sfdisk -q "${raw}"
offset=$((2048 * 512))
mkfs.vfat -F 16 --offset 2048 "${raw}" $(( 32 * 1024 - 1024 )) >/dev/null
cat > "${work}/syslinux.cfg" <<'CFG'
SERIAL 0 115200
DEFAULT guest
TIMEOUT 1
LABEL guest
  KERNEL vmlinuz
  INITRD initrd.gz
  APPEND console=ttyS0 panic=-1 quiet
CFG
mcopy -i "${raw}@@${offset}" "${kroot}/boot/vmlinuz-${kver}" ::vmlinuz
mcopy -i "${raw}@@${offset}" "${work}/initrd.gz" ::initrd.gz
mcopy -i "${raw}@@${offset}" "${work}/syslinux.cfg" ::syslinux.cfg
syslinux --offset "${offset}" --install "${raw}"
dd if=/usr/lib/syslinux/mbr/mbr.bin of="${raw}" conv=notrunc bs=440 count=1 status=none
qemu-img convert -O qcow2 "${raw}" "${out}.tmp"
mv "${out}.tmp" "${out}"
echo "${stamp}" > "${out}.stamp"
echo "build-guest-image: ${out} ($(du -h "${out}" | cut -f1))"

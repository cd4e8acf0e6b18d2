#!/usr/bin/env bash
# Builds an installer ISO for the test guest (hack/build-guest-image.sh),
# from Debian packages only (hack/install-libvirt.sh installs the tools):
# booted (BIOS: isolinux; no EFI boot), its init (hack/guest/installer-init)
# reads the NoCloud seed's cloud-config, installs the test guest onto the
# first blank disk with the cloud-config's write_files in it and its runcmd
# kept for the first boot, reports BANLIEUE-INSTALLER lines on ttyS0 and
# powers off. The installed disk boots by itself (SeaBIOS) as the guest
# image does, also printing BANLIEUE-INSTALLED lines; a blank disk is not
# bootable, so with disk-then-CD-ROM boot order a new VM installs itself
# and then boots from its disk.
#
#   hack/build-installer-iso.sh OUTPUT.iso
#
# It reuses the guest's build (the guest image is built next to OUTPUT
# first, in OUTPUT's directory/guest-build: the kernel unpacked from its
# .deb and the guest's initramfs). Nothing is mounted and no privilege is
# needed beyond what the guest image needs. The ISO is rebuilt only when
# this script, the installer's files or the guest image's inputs change.
set -o errexit
set -o nounset
set -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:?usage: build-installer-iso.sh OUTPUT.iso}"
dir="$(dirname "${out}")"
work="${dir}/installer-build"
gwork="${dir}/guest-build"
mkdir -p "${work}"

# The guest: its kernel and initramfs are what gets installed.
"${ROOT}/hack/build-guest-image.sh" "${dir}/guest.qcow2"
if [[ ! -f "${gwork}/initrd.gz" ]]; then
    rm -f "${dir}/guest.qcow2.stamp"
    "${ROOT}/hack/build-guest-image.sh" "${dir}/guest.qcow2"
fi
gstamp="$(cat "${dir}/guest.qcow2.stamp")"
kpkg="${gstamp#*-}"
kver="${kpkg#linux-image-}"
stamp="$(cat "${BASH_SOURCE[0]}" "${ROOT}/hack/guest/installer-init" "${ROOT}"/hack/guest/installer/* | sha256sum | cut -c1-16)-${gstamp}"
if [[ -f "${out}" && -f "${out}.stamp" && "$(cat "${out}.stamp")" == "${stamp}" ]]; then
    exit 0
fi
echo "build-installer-iso: building ${out} (${kpkg})..."
isolinux=/usr/lib/ISOLINUX/isolinux.bin
[[ -f "${isolinux}" ]] || { echo "build-installer-iso: no ${isolinux} (the isolinux package: make libvirt)" >&2; exit 1; }

tree="${work}/tree"
rm -rf "${tree}" && mkdir -p "${tree}/isolinux" "${tree}/banlieue"

# The installed disk's template: MBR + one bootable FAT16 partition at
# 1 MiB, labelled BANLIEUE, syslinux installed, its configuration loading
# the guest's initramfs and then site.gz (the installer writes both, and
# the kernel). Compressed, a few hundred KB.
raw="${work}/disk.raw"
rm -f "${raw}" && truncate -s 32M "${raw}"
echo 'start=2048, type=6, bootable' | sfdisk -q "${raw}"
offset=$((2048 * 512))
mkfs.vfat -F 16 -n BANLIEUE --offset 2048 "${raw}" $(( 32 * 1024 - 1024 )) >/dev/null
cat > "${work}/syslinux.cfg" <<'CFG'
SERIAL 0 115200
DEFAULT guest
TIMEOUT 1
LABEL guest
  KERNEL vmlinuz
  INITRD initrd.gz,site.gz
  APPEND console=ttyS0 panic=-1 quiet
CFG
mcopy -i "${raw}@@${offset}" "${work}/syslinux.cfg" ::syslinux.cfg
syslinux --offset "${offset}" --install "${raw}"
dd if=/usr/lib/syslinux/mbr/mbr.bin of="${raw}" conv=notrunc bs=440 count=1 status=none
gzip -9 -c "${raw}" > "${tree}/banlieue/disk.img.gz"
rm -f "${raw}"

# The installer's initramfs: the guest's, then this archive over it (its
# /init replaces the guest's).
ird="${work}/initramfs"
rm -rf "${ird}" && mkdir -p "${ird}/installer"
install -m 0755 "${ROOT}/hack/guest/installer-init" "${ird}/init"
cp "${ROOT}"/hack/guest/installer/* "${ird}/installer/"
(cd "${ird}" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -9) > "${tree}/install.gz"

cp "${gwork}/kernel-${kpkg}/boot/vmlinuz-${kver}" "${tree}/vmlinuz"
cp "${gwork}/initrd.gz" "${tree}/initrd.gz"
echo "${stamp}" > "${tree}/banlieue/installer"
cp "${isolinux}" "${tree}/isolinux/isolinux.bin"
cp /usr/lib/syslinux/modules/bios/ldlinux.c32 "${tree}/isolinux/ldlinux.c32"
cat > "${tree}/isolinux/isolinux.cfg" <<'CFG'
SERIAL 0 115200
DEFAULT install
TIMEOUT 1
LABEL install
  KERNEL /vmlinuz
  INITRD /initrd.gz,/install.gz
  APPEND console=ttyS0 panic=-1 quiet
CFG
genisoimage -quiet -o "${out}.tmp" -V BANLIEUE_INSTALLER -R -J \
    -b isolinux/isolinux.bin -c isolinux/boot.cat -no-emul-boot -boot-load-size 4 -boot-info-table \
    "${tree}"
mv "${out}.tmp" "${out}"
echo "${stamp}" > "${out}.stamp"
echo "build-installer-iso: ${out} ($(du -h "${out}" | cut -f1))"

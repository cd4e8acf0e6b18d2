#!/usr/bin/env bash
# Builds an installer ISO for the test guest (hack/build-guest-image.sh),
# from Debian packages only (hack/install-libvirt.sh installs the tools).
# Booted (BIOS: isolinux; UEFI: systemd-boot), its init
# (hack/guest/installer-init) reads the NoCloud seed's cloud-config,
# installs the test guest onto the first blank disk with the
# cloud-config's write_files in it and its runcmd kept for the first boot,
# reports BANLIEUE-INSTALLER lines on ttyS0 and powers off. The installed
# disk boots by itself as the guest image does (BIOS: syslinux; UEFI:
# systemd-boot, from the same FAT partition), also printing
# BANLIEUE-INSTALLED lines. A blank disk is not bootable, so with
# disk-then-CD-ROM boot order a new VM installs itself, then boots its disk.
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
sdboot=/usr/lib/systemd/boot/efi/systemd-bootx64.efi
for f in "${isolinux}" "${sdboot}"; do
    [[ -f "${f}" ]] || { echo "build-installer-iso: no ${f} (packages isolinux, systemd-boot-efi: make libvirt)" >&2; exit 1; }
done
options="console=ttyS0 panic=-1 quiet"

tree="${work}/tree"
rm -rf "${tree}" && mkdir -p "${tree}/isolinux" "${tree}/banlieue"

# The installed disk's template: MBR + one bootable FAT16 partition at
# 1 MiB, labelled BANLIEUE, with syslinux (BIOS) and systemd-boot as
# EFI/BOOT/BOOTX64.EFI (UEFI firmware boots it from the FAT partition),
# both loading the kernel, the guest's initramfs and then site.gz (the
# installer writes the three). Compressed, a few hundred KB.
raw="${work}/disk.raw"
rm -f "${raw}" && truncate -s 32M "${raw}"
echo 'start=2048, type=6, bootable' | sfdisk -q "${raw}"
offset=$((2048 * 512))
mkfs.vfat -F 16 -n BANLIEUE --offset 2048 "${raw}" $(( 32 * 1024 - 1024 )) >/dev/null
cat > "${work}/syslinux.cfg" <<CFG
SERIAL 0 115200
DEFAULT guest
TIMEOUT 1
LABEL guest
  KERNEL vmlinuz
  INITRD initrd.gz,site.gz
  APPEND ${options}
CFG
mcopy -i "${raw}@@${offset}" "${work}/syslinux.cfg" ::syslinux.cfg
# systemd-boot: loader.conf and one entry (timeout 0: no menu).
esp() { # esp IMAGE@@OFFSET ENTRY INITRD...: systemd-boot onto a FAT image
    local img="$1" entry="$2"
    shift 2
    mmd -i "${img}" ::EFI ::EFI/BOOT ::loader ::loader/entries
    mcopy -i "${img}" "${sdboot}" ::EFI/BOOT/BOOTX64.EFI
    printf 'timeout 0\ndefault %s.conf\n' "${entry}" > "${work}/loader.conf"
    { printf 'title banlieue %s\nlinux /vmlinuz\n' "${entry}"
      for i in "$@"; do printf 'initrd /%s\n' "${i}"; done
      printf 'options %s\n' "${options}"; } > "${work}/${entry}.conf"
    mcopy -i "${img}" "${work}/loader.conf" ::loader/loader.conf
    mcopy -i "${img}" "${work}/${entry}.conf" "::loader/entries/${entry}.conf"
}
esp "${raw}@@${offset}" guest initrd.gz site.gz
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
cat > "${tree}/isolinux/isolinux.cfg" <<CFG
SERIAL 0 115200
DEFAULT install
TIMEOUT 1
LABEL install
  KERNEL /vmlinuz
  INITRD /initrd.gz,/install.gz
  APPEND ${options}
CFG
# The UEFI boot image (El Torito, EFI platform): a FAT image with
# systemd-boot, the kernel and both initramfs archives (UEFI reads the
# image, not the ISO 9660 files).
efi="${tree}/banlieue/efiboot.img"
size=$(( ($(du -cb "${tree}/vmlinuz" "${tree}/initrd.gz" "${tree}/install.gz" "${sdboot}" | tail -n 1 | cut -f1) / 1024) + 1024 ))
mkfs.vfat -C "${efi}" "${size}" >/dev/null
esp "${efi}" install initrd.gz install.gz
mcopy -i "${efi}" "${tree}/vmlinuz" "${tree}/initrd.gz" "${tree}/install.gz" ::
genisoimage -quiet -o "${out}.tmp" -V BANLIEUE_INSTALLER -R -J \
    -b isolinux/isolinux.bin -c isolinux/boot.cat -no-emul-boot -boot-load-size 4 -boot-info-table \
    -eltorito-alt-boot -e banlieue/efiboot.img -no-emul-boot \
    "${tree}"
mv "${out}.tmp" "${out}"
echo "${stamp}" > "${out}.stamp"
echo "build-installer-iso: ${out} ($(du -h "${out}" | cut -f1))"

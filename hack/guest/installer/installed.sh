# The installed system's own step (an installer ISO put it at
# /etc/banlieue-installed.sh; hack/guest/init sources it before READY):
#   BANLIEUE-INSTALLED <line>  each line of each file under /etc/banlieue/
#                              (the cloud-config's write_files), in path order
#   BANLIEUE-RUNCMD <line>     at the first boot only: what the
#                              cloud-config's runcmd printed
# runcmd.sh lives on the boot partition (FAT, label BANLIEUE) and is
# deleted once run, so a later boot does not run it again.
for f in $(find /etc/banlieue -type f 2>/dev/null | sort); do
    while IFS= read -r l || [ -n "${l}" ]; do
        echo "BANLIEUE-INSTALLED ${l}"
    done < "${f}"
done
boot=$(findfs LABEL=BANLIEUE 2>/dev/null)
if [ -n "${boot}" ] && mkdir -p /boot && mount -t vfat "${boot}" /boot; then
    if [ -f /boot/runcmd.sh ]; then
        sh /boot/runcmd.sh > /tmp/runcmd.out 2>&1
        while IFS= read -r l || [ -n "${l}" ]; do
            echo "BANLIEUE-RUNCMD ${l}"
        done < /tmp/runcmd.out
        rm -f /boot/runcmd.sh
    fi
    umount /boot
fi

#!/bin/sh
# SPDX-License-Identifier: MIT
# PID 1 of the VM that tests/vm/run.sh boots, run from the host's root filesystem (read-only over 9p):
# mounts the pseudo filesystems, the run directory (9p tag "out") and the ext4 scratch disk, runs the
# command in /run/vm/cmd as root, saves its output, exit status and the kernel log, and powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
ln -sf /proc/self/fd /dev/fd # bash's process substitution
mount -t cgroup2 cgroup2 /sys/fs/cgroup
# /tmp stays the host's (read-only): the checkout under test may live there. Writable temporary files
# go to a tmpfs under /run (TMPDIR), the workload files to the scratch disk.
mount -t tmpfs run /run
mkdir -p /run/vm /run/scratch /run/tmp
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /run/vm &&
	modprobe virtio_blk && modprobe ext4 && mount -t ext4 /dev/vda /run/scratch; then
	sh /run/vm/cmd </dev/null >/run/vm/out 2>&1
	echo $? >/run/vm/rc
else
	echo "guest-init: setting up the run directory or the scratch disk failed"
fi
dmesg >/run/vm/dmesg
umount /run/scratch
umount /run/vm
sync
exec /bin/busybox poweroff -f

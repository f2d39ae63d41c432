// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Automatic mode: so that a user need not list every file, the module registers by itself the regular
 * files that one process (LLMCACHE_AUTO_PID) or every process of one cgroup v2 (LLMCACHE_AUTO_CGROUP,
 * given by a descriptor of its directory) has open or mapped, when they are at least min_size bytes
 * and live on storage (their mapping can read a folio: not tmpfs, shmem or hugetlbfs).
 *
 * A delayed work scans once a second, in process context, holding only references:
 * - the target process is a struct pid reference, its task found again at every scan
 *   (get_pid_task, RCU inside); the cgroup is a reference from cgroup_get_from_fd, its processes
 *   found under rcu_read_lock (for_each_process, task_dfl_cgroup) and each held by get_task_struct;
 * - open files: under task_lock (task->files stays put), iterate_fd walks the table under the
 *   table's spinlock, and the callback only takes file references (get_file) of candidates;
 * - mapped files: get_task_mm, then the VMAs' vm_file under mmap_read_lock, again only get_file;
 * - then, with no spinlock held, each candidate not registered yet is registered under
 *   llc_reg_mutex (which takes its own reference), and the scan's references are dropped.
 * It stops when turned off, when the target process exits, when the cgroup is removed, and at unload;
 * the files it registered stay registered. A file unregistered by hand while the mode is on comes back
 * at the next scan.
 */
#include <linux/cgroup.h>
#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/workqueue.h>
#include "internal.h"

#define LLC_AUTO_FILES 64  /* candidates taken from one process per scan */
#define LLC_AUTO_TASKS 256 /* processes of a cgroup scanned per scan */

static DEFINE_MUTEX(llc_auto_mutex); /* the state below and the scan */
static struct {
	u32 mode;          /* enum llmcache_auto_mode */
	struct pid *pid;
	struct cgroup *cgrp;
	u64 target;        /* pid, or the cgroup's id (its directory's inode number) */
	u64 min_size;
	u64 registered;    /* files this mode registered since it was set */
	u64 scans;
} llc_auto;

static struct file *llc_auto_files[LLC_AUTO_FILES]; /* one process's candidates */
static unsigned int llc_auto_nfiles;
static struct task_struct *llc_auto_tasks[LLC_AUTO_TASKS];

static void llc_auto_worker(struct work_struct *w);
static DECLARE_DELAYED_WORK(llc_auto_work, llc_auto_worker);

/* Take a reference to file if it is a candidate; nonzero when the batch is full. Atomic context. */
static int llc_auto_take(struct file *file)
{
	struct inode *inode = file_inode(file);
	unsigned int i;

	if (!S_ISREG(inode->i_mode) || i_size_read(inode) < llc_auto.min_size || !file->f_mapping->a_ops->read_folio)
		return 0;
	for (i = 0; i < llc_auto_nfiles; i++)
		if (llc_auto_files[i]->f_mapping == file->f_mapping)
			return 0;
	llc_auto_files[llc_auto_nfiles++] = get_file(file);
	return llc_auto_nfiles == LLC_AUTO_FILES;
}

static int llc_auto_fd(const void *unused, struct file *file, unsigned int fd)
{
	return llc_auto_take(file);
}

/* Register the candidates of one process. */
static void llc_auto_scan_task(struct task_struct *task)
{
	struct vm_area_struct *vma;
	struct mm_struct *mm;
	unsigned int i;
	u64 id;

	llc_auto_nfiles = 0;
	task_lock(task);
	if (task->files)
		iterate_fd(task->files, 0, llc_auto_fd, NULL);
	task_unlock(task);
	mm = llc_auto_nfiles < LLC_AUTO_FILES ? get_task_mm(task) : NULL;
	if (mm) {
		VMA_ITERATOR(vmi, mm, 0);

		mmap_read_lock(mm);
		for_each_vma(vmi, vma)
			if (vma->vm_file && llc_auto_take(vma->vm_file))
				break;
		mmap_read_unlock(mm);
		mmput(mm);
	}
	if (!llc_auto_nfiles)
		return;
	mutex_lock(&llc_reg_mutex);
	for (i = 0; i < llc_auto_nfiles; i++)
		if (!llc_file_by_mapping(llc_auto_files[i]->f_mapping) && !llc_register(llc_auto_files[i], &id))
			llc_auto.registered++;
	mutex_unlock(&llc_reg_mutex);
	for (i = 0; i < llc_auto_nfiles; i++)
		fput(llc_auto_files[i]);
}

/* Drop the target. Caller holds llc_auto_mutex. */
static void llc_auto_clear(void)
{
	put_pid(llc_auto.pid);
	if (llc_auto.cgrp)
		cgroup_put(llc_auto.cgrp);
	llc_auto.pid = NULL;
	llc_auto.cgrp = NULL;
	llc_auto.mode = LLMCACHE_AUTO_OFF;
}

/* The processes of the cgroup (and its descendants), referenced; returns how many. */
static unsigned int llc_auto_cgroup_tasks(void)
{
	struct task_struct *p;
	unsigned int n = 0;

	rcu_read_lock();
	for_each_process(p) {
		if (!(p->flags & PF_KTHREAD) && cgroup_is_descendant(task_dfl_cgroup(p), llc_auto.cgrp)) {
			llc_auto_tasks[n++] = get_task_struct(p);
			if (n == LLC_AUTO_TASKS)
				break;
		}
	}
	rcu_read_unlock();
	return n;
}

static void llc_auto_worker(struct work_struct *w)
{
	struct task_struct *task;
	unsigned int n, i;

	mutex_lock(&llc_auto_mutex);
	if (llc_auto.mode == LLMCACHE_AUTO_PID) {
		task = get_pid_task(llc_auto.pid, PIDTYPE_TGID);
		if (!task || (READ_ONCE(task->flags) & PF_EXITING)) {
			llc_auto_clear(); /* the process exited */
		} else {
			llc_auto_scan_task(task);
			llc_auto.scans++;
		}
		if (task)
			put_task_struct(task);
	} else if (llc_auto.mode == LLMCACHE_AUTO_CGROUP) {
		if (!(READ_ONCE(llc_auto.cgrp->self.flags) & CSS_ONLINE)) {
			llc_auto_clear(); /* the cgroup was removed */
		} else {
			n = llc_auto_cgroup_tasks();
			for (i = 0; i < n; i++) {
				llc_auto_scan_task(llc_auto_tasks[i]);
				put_task_struct(llc_auto_tasks[i]);
			}
			llc_auto.scans++;
		}
	}
	if (llc_auto.mode != LLMCACHE_AUTO_OFF)
		schedule_delayed_work(&llc_auto_work, HZ);
	mutex_unlock(&llc_auto_mutex);
}

long llc_auto_ioctl(void __user *arg)
{
	struct llmcache_ioc_auto req;
	struct cgroup *cgrp = NULL;
	struct pid *pid = NULL;
	struct task_struct *task;
	u64 target = 0;

	if (copy_from_user(&req, arg, sizeof(req)))
		return -EFAULT;
	if (req.flags || req.pad || req.mode > LLMCACHE_AUTO_CGROUP)
		return -EINVAL;
	if (req.mode != LLMCACHE_AUTO_OFF && req.min_size < LLMCACHE_BLOCK_SIZE)
		return -EINVAL;
	if (req.mode == LLMCACHE_AUTO_PID) {
		if (req.target <= 0)
			return -EINVAL;
		pid = find_get_pid(req.target);
		task = pid ? get_pid_task(pid, PIDTYPE_TGID) : NULL; /* NULL for a thread that is not a leader */
		if (!task || (task->flags & PF_KTHREAD)) {
			if (task)
				put_task_struct(task);
			put_pid(pid);
			return -ESRCH;
		}
		put_task_struct(task);
		target = req.target;
	} else if (req.mode == LLMCACHE_AUTO_CGROUP) {
		cgrp = cgroup_get_from_fd(req.target); /* cgroup v2 directories only */
		if (IS_ERR(cgrp))
			return PTR_ERR(cgrp);
		target = cgroup_id(cgrp);
	}
	mutex_lock(&llc_auto_mutex);
	llc_auto_clear();
	llc_auto.mode = req.mode;
	llc_auto.pid = pid;
	llc_auto.cgrp = cgrp;
	llc_auto.target = target;
	llc_auto.min_size = req.mode == LLMCACHE_AUTO_OFF ? 0 : req.min_size;
	llc_auto.registered = 0;
	llc_auto.scans = 0;
	if (req.mode != LLMCACHE_AUTO_OFF)
		mod_delayed_work(system_wq, &llc_auto_work, 0);
	mutex_unlock(&llc_auto_mutex);
	return 0;
}

/* At unload, after the device is gone: no scan runs or registers anything afterwards. */
void llc_auto_exit(void)
{
	mutex_lock(&llc_auto_mutex);
	llc_auto_clear();
	mutex_unlock(&llc_auto_mutex);
	cancel_delayed_work_sync(&llc_auto_work);
}

/* auto/: the mode's state, read-only. */
static ssize_t mode_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	static const char *const names[] = { "off", "pid", "cgroup" };

	return sysfs_emit(buf, "%s\n", names[READ_ONCE(llc_auto.mode)]);
}

#define LLC_AUTO_ATTR(name)									\
static ssize_t name##_show(struct kobject *k, struct kobj_attribute *a, char *buf)		\
{												\
	u64 v;											\
												\
	mutex_lock(&llc_auto_mutex);								\
	v = llc_auto.name;									\
	mutex_unlock(&llc_auto_mutex);								\
	return sysfs_emit(buf, "%llu\n", v);							\
}												\
static struct kobj_attribute auto_##name##_attr = __ATTR_RO(name)

LLC_AUTO_ATTR(target);
LLC_AUTO_ATTR(min_size);
LLC_AUTO_ATTR(registered);
LLC_AUTO_ATTR(scans);
static struct kobj_attribute auto_mode_attr = __ATTR_RO(mode);

static struct attribute *llc_auto_attrs[] = {
	&auto_mode_attr.attr, &auto_target_attr.attr, &auto_min_size_attr.attr, &auto_registered_attr.attr,
	&auto_scans_attr.attr, NULL,
};
const struct attribute_group llc_auto_group = { .name = "auto", .attrs = llc_auto_attrs };

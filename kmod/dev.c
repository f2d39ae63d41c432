// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * /dev/llmcache: root-only misc device. Its ioctls register and unregister files by descriptor, set and
 * get per-file options, read the statistics and the per-loop sizing table, and switch the automatic
 * mode (ABI in include/uapi/llmcache.h).
 */
#include <linux/capability.h>
#include <linux/file.h>
#include <linux/miscdevice.h>
#include <linux/uaccess.h>
#include "internal.h"
#include "kv_stats.h"

static int llc_dev_open(struct inode *inode, struct file *file)
{
	return capable(CAP_SYS_ADMIN) ? 0 : -EPERM;
}

static long llc_ioc_file(unsigned int cmd, void __user *arg)
{
	struct llmcache_ioc_file req;
	struct llc_file *f = NULL;
	struct file *file;
	long err;

	if (copy_from_user(&req, arg, sizeof(req)))
		return -EFAULT;
	if (req.flags)
		return -EINVAL;
	file = fget(req.fd);
	if (!file)
		return -EBADF;
	if (cmd == LLMCACHE_IOC_REGISTER) { /* allocated before the mutex: it guards only the link */
		f = llc_file_new(file, GFP_KERNEL);
		if (IS_ERR(f)) {
			fput(file);
			return PTR_ERR(f);
		}
	}
	mutex_lock(&llc_reg_mutex);
	if (cmd == LLMCACHE_IOC_REGISTER) {
		err = llc_file_link(&f, &req.id);
	} else {
		f = llc_file_by_mapping(file->f_mapping);
		err = f ? 0 : -ENOENT;
		if (f) {
			req.id = f->id;
			llc_unregister(f);
		}
	}
	mutex_unlock(&llc_reg_mutex);
	if (cmd == LLMCACHE_IOC_REGISTER)
		llc_file_free(f); /* a duplicate: never linked */
	fput(file);
	if (!err && copy_to_user(arg, &req, sizeof(req)))
		err = -EFAULT;
	return err;
}

static long llc_ioc_file_stats(void __user *arg)
{
	struct llmcache_ioc_file_stats st;
	struct llc_file *f;
	struct file *file;
	unsigned long flags;
	int i;

	if (copy_from_user(&st, arg, sizeof(st)))
		return -EFAULT;
	if (st.flags)
		return -EINVAL;
	file = fget(st.fd);
	if (!file)
		return -EBADF;
	mutex_lock(&llc_reg_mutex);
	f = llc_file_by_mapping(file->f_mapping);
	if (f) {
		spin_lock_irqsave(&llc.lock, flags);
		st.id = f->id;
		st.accesses = f->accesses;
		for (i = 0; i < LLMCACHE_NR_CLASSES; i++)
			st.class_blocks[i] = f->class_blocks[i];
		st.added = f->added;
		st.removed = READ_ONCE(f->removed);
		spin_unlock_irqrestore(&llc.lock, flags);
	}
	mutex_unlock(&llc_reg_mutex);
	fput(file);
	if (!f)
		return -ENOENT;
	return copy_to_user(arg, &st, sizeof(st)) ? -EFAULT : 0;
}

/*
 * Per-file options: stored here, honoured by the hooks and the pin worker. A change kicks the worker so
 * that pins follow it.
 */
static long llc_ioc_file_opts(unsigned int cmd, void __user *arg)
{
	struct llmcache_ioc_file_opts req;
	struct llc_file *f;
	struct file *file;
	unsigned long flags;
	long err = 0;

	if (copy_from_user(&req, arg, sizeof(req)))
		return -EFAULT;
	if (cmd == LLMCACHE_IOC_SET_FILE_OPTS && (req.flags & ~LLMCACHE_FILE_FLAGS_ALL))
		return -EINVAL;
	file = fget(req.fd);
	if (!file)
		return -EBADF;
	if (!S_ISREG(file_inode(file)->i_mode)) {
		fput(file);
		return -EINVAL;
	}
	mutex_lock(&llc_reg_mutex);
	f = llc_file_by_mapping(file->f_mapping);
	if (f) {
		spin_lock_irqsave(&llc.lock, flags);
		if (cmd == LLMCACHE_IOC_SET_FILE_OPTS) {
			WRITE_ONCE(f->flags, req.flags);
			f->pin_limit = req.pin_limit;
		} else {
			req.flags = f->flags;
			req.pin_limit = f->pin_limit;
		}
		spin_unlock_irqrestore(&llc.lock, flags);
	}
	mutex_unlock(&llc_reg_mutex);
	fput(file);
	if (!f)
		return -ENOENT;
	if (cmd == LLMCACHE_IOC_SET_FILE_OPTS) {
		llc_pin_kick();
		llc_hot_kick();
		llc_seq_kick();
	}
	else if (copy_to_user(arg, &req, sizeof(req)))
		err = -EFAULT;
	return err;
}

static long llc_ioc_stats(void __user *arg)
{
	struct llmcache_ioc_stats st = {};

	BUILD_BUG_ON(LLMCACHE_NR_STATS > LLMCACHE_STATS_MAX);
	llc_snapshot(st.stats, st.class_seqs);
	st.nr_stats = LLMCACHE_NR_STATS;
	mutex_lock(&llc_reg_mutex);
	st.registered = llc.nr_files;
	mutex_unlock(&llc_reg_mutex);
	st.hook_mode = llc.hook_mode;
	st.enabled = READ_ONCE(llc.enabled);
	return copy_to_user(arg, &st, sizeof(st)) ? -EFAULT : 0;
}

static long llc_dev_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case LLMCACHE_IOC_REGISTER:
	case LLMCACHE_IOC_UNREGISTER:
		return llc_ioc_file(cmd, uarg);
	case LLMCACHE_IOC_FILE_STATS:
		return llc_ioc_file_stats(uarg);
	case LLMCACHE_IOC_STATS:
		return llc_ioc_stats(uarg);
	case LLMCACHE_IOC_SET_FILE_OPTS:
	case LLMCACHE_IOC_GET_FILE_OPTS:
		return llc_ioc_file_opts(cmd, uarg);
	case LLMCACHE_IOC_SET_AUTO:
		return llc_auto_ioctl(uarg);
	case LLMCACHE_IOC_LOOPS:
		return llc_loops_ioctl(uarg);
	case LLMCACHE_IOC_KV_STATS:
		return llc_kv_push(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations llc_dev_fops = {
	.owner = THIS_MODULE,
	.open = llc_dev_open,
	.unlocked_ioctl = llc_dev_ioctl,
	.compat_ioctl = compat_ptr_ioctl,
};

static struct miscdevice llc_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = LLMCACHE_DEV_NAME,
	.fops = &llc_dev_fops,
	.mode = 0600,
};

int llc_dev_init(void)
{
	return misc_register(&llc_misc);
}

void llc_dev_exit(void)
{
	misc_deregister(&llc_misc);
}

// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * /sys/kernel/llmcache/: one value per file (Documentation/ABI/testing/sysfs-kernel-llmcache).
 * Tunables are 0644, everything else 0444; garbage is refused with -EINVAL and changes nothing.
 */
#include <linux/dcache.h>
#include <linux/file.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include "internal.h"

static struct kobject *llc_kobj, *llc_files_kobj;

/* /sys/kernel/llmcache, for the parts that add directories of their own (kv_stats.c). */
struct kobject *llc_sysfs_root(void)
{
	return llc_kobj;
}

static ssize_t enable_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%d\n", READ_ONCE(llc.enabled));
}

static ssize_t enable_store(struct kobject *k, struct kobj_attribute *a, const char *buf, size_t len)
{
	unsigned int v;

	if (kstrtouint(buf, 0, &v) || v > 1)
		return -EINVAL;
	mutex_lock(&llc_reg_mutex);
	WRITE_ONCE(llc.enabled, v);
	llc_update_active();
	if (!v)
		llc_pin_release(); /* disabled: the hooks no longer track the pinned pages */
	mutex_unlock(&llc_reg_mutex);
	if (v) {
		llc_pin_kick();
		llc_hot_kick();
	}
	return len;
}

/* The u64 tunables, each with the smallest value it accepts and what a change sets off. */
#define LLC_U64_ATTR(name, min, then)								\
static ssize_t name##_show(struct kobject *k, struct kobj_attribute *a, char *buf)	\
{											\
	return sysfs_emit(buf, "%llu\n", READ_ONCE(llc.name));				\
}											\
static ssize_t name##_store(struct kobject *k, struct kobj_attribute *a,		\
			    const char *buf, size_t len)				\
{											\
	u64 v;										\
											\
	if (kstrtou64(buf, 0, &v) || v < (min))						\
		return -EINVAL;								\
	WRITE_ONCE(llc.name, v);							\
	then;										\
	return len;									\
}											\
static struct kobj_attribute name##_attr = __ATTR_RW(name)

LLC_U64_ATTR(pin_budget, 0, llc_pin_kick());
LLC_U64_ATTR(hot_reserve, 0, llc_hot_kick());
LLC_U64_ATTR(bw, 0, (void)0);
LLC_U64_ATTR(t_ns, 0, (void)0);
LLC_U64_ATTR(seq_drop_ns, 0, llc_seq_kick());

static ssize_t hook_mode_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%s\n", llc.hook_mode == LLMCACHE_HOOK_TRACEPOINT ? "tracepoint" : "kprobe");
}

static ssize_t registered_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	unsigned int n;

	mutex_lock(&llc_reg_mutex);
	n = llc.nr_files;
	mutex_unlock(&llc_reg_mutex);
	return sysfs_emit(buf, "%u\n", n);
}

static struct kobj_attribute enable_attr = __ATTR_RW(enable);
static struct kobj_attribute hook_mode_attr = __ATTR_RO(hook_mode);
static struct kobj_attribute registered_attr = __ATTR_RO(registered);

static struct attribute *llc_attrs[] = {
	&enable_attr.attr, &pin_budget_attr.attr, &hot_reserve_attr.attr, &bw_attr.attr, &t_ns_attr.attr,
	&hook_mode_attr.attr, &registered_attr.attr, &seq_drop_ns_attr.attr, NULL,
};
static const struct attribute_group llc_group = { .attrs = llc_attrs };

/* stats/: enum llmcache_stat in order, then the live sequences per class. */
struct llc_stat_attr {
	struct kobj_attribute attr;
	int idx; /* < LLMCACHE_NR_STATS: a statistic; else LLMCACHE_NR_STATS + class */
};

static ssize_t llc_stat_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	int idx = container_of(a, struct llc_stat_attr, attr)->idx;
	u64 stats[LLMCACHE_NR_STATS], seqs[LLMCACHE_NR_CLASSES];

	llc_snapshot(stats, seqs);
	return sysfs_emit(buf, "%llu\n", idx < LLMCACHE_NR_STATS ? stats[idx] : seqs[idx - LLMCACHE_NR_STATS]);
}

#define LLC_STAT(n, i) { .attr = __ATTR(n, 0444, llc_stat_show, NULL), .idx = (i) }
static struct llc_stat_attr llc_stat_attrs[] = {
	LLC_STAT(accesses, LLMCACHE_STAT_ACCESSES),
	LLC_STAT(hits, LLMCACHE_STAT_HITS),
	LLC_STAT(misses, LLMCACHE_STAT_MISSES),
	LLC_STAT(seq_blocks, LLMCACHE_STAT_SEQ_BLOCKS),
	LLC_STAT(loop_blocks, LLMCACHE_STAT_LOOP_BLOCKS),
	LLC_STAT(hot_blocks, LLMCACHE_STAT_HOT_BLOCKS),
	LLC_STAT(loop_iterations, LLMCACHE_STAT_LOOP_ITERATIONS),
	LLC_STAT(seqs_created, LLMCACHE_STAT_SEQS_CREATED),
	LLC_STAT(seqs_recycled, LLMCACHE_STAT_SEQS_RECYCLED),
	LLC_STAT(chunks_recycled, LLMCACHE_STAT_CHUNKS_RECYCLED),
	LLC_STAT(pinned, LLMCACHE_STAT_PINNED),
	LLC_STAT(shrinker_released, LLMCACHE_STAT_SHRINKER_RELEASED),
	LLC_STAT(events_dropped, LLMCACHE_STAT_EVENTS_DROPPED),
	LLC_STAT(seq_dropped, LLMCACHE_STAT_SEQ_DROPPED),
	LLC_STAT(loop_dropped, LLMCACHE_STAT_LOOP_DROPPED),
	LLC_STAT(loop_read_ahead, LLMCACHE_STAT_LOOP_READ_AHEAD),
	LLC_STAT(reuse_room, LLMCACHE_STAT_REUSE_ROOM),
	LLC_STAT(hot_protected, LLMCACHE_STAT_HOT_PROTECTED),
	LLC_STAT(seq_seqs, LLMCACHE_NR_STATS + LLMCACHE_CLASS_SEQ),
	LLC_STAT(loop_seqs, LLMCACHE_NR_STATS + LLMCACHE_CLASS_LOOP),
	LLC_STAT(hot_seqs, LLMCACHE_NR_STATS + LLMCACHE_CLASS_HOT),
};
static struct attribute *llc_stat_list[ARRAY_SIZE(llc_stat_attrs) + 1];
static const struct attribute_group llc_stats_group = { .name = "stats", .attrs = llc_stat_list };

/* files/<id>/: one directory per registered file. */
static struct llc_file *to_file(struct kobject *k)
{
	return container_of(k, struct llc_file, kobj);
}

static ssize_t path_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	char *tmp = kmalloc(PATH_MAX, GFP_KERNEL), *p;
	ssize_t n;

	if (!tmp)
		return -ENOMEM;
	p = d_path(&to_file(k)->file->f_path, tmp, PATH_MAX);
	n = IS_ERR(p) ? PTR_ERR(p) : sysfs_emit(buf, "%s\n", p);
	kfree(tmp);
	return n;
}

static ssize_t llc_file_counter(struct kobject *k, const u64 *field, char *buf)
{
	unsigned long flags;
	u64 v;

	spin_lock_irqsave(&llc.lock, flags);
	v = READ_ONCE(*field); /* pinned and removed are written under llc.hold_lock */
	spin_unlock_irqrestore(&llc.lock, flags);
	return sysfs_emit(buf, "%llu\n", v);
}

#define LLC_FILE_ATTR(name, field)								\
static ssize_t name##_show(struct kobject *k, struct kobj_attribute *a, char *buf)		\
{												\
	return llc_file_counter(k, &to_file(k)->field, buf);					\
}												\
static struct kobj_attribute file_##name##_attr = __ATTR_RO(name)

LLC_FILE_ATTR(accesses, accesses);
LLC_FILE_ATTR(seq_blocks, class_blocks[LLMCACHE_CLASS_SEQ]);
LLC_FILE_ATTR(loop_blocks, class_blocks[LLMCACHE_CLASS_LOOP]);
LLC_FILE_ATTR(hot_blocks, class_blocks[LLMCACHE_CLASS_HOT]);
LLC_FILE_ATTR(added, added);
LLC_FILE_ATTR(removed, removed);
LLC_FILE_ATTR(pinned, pinned);
LLC_FILE_ATTR(pin_limit, pin_limit);
static struct kobj_attribute file_path_attr = __ATTR_RO(path);

static ssize_t flags_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(to_file(k)->flags));
}
static struct kobj_attribute file_flags_attr = __ATTR_RO(flags);

static struct attribute *llc_file_attrs[] = {
	&file_path_attr.attr, &file_accesses_attr.attr, &file_seq_blocks_attr.attr,
	&file_loop_blocks_attr.attr, &file_hot_blocks_attr.attr, &file_added_attr.attr,
	&file_removed_attr.attr, &file_pinned_attr.attr, &file_flags_attr.attr, &file_pin_limit_attr.attr, NULL,
};
ATTRIBUTE_GROUPS(llc_file);

static void llc_file_release(struct kobject *k)
{
	struct llc_file *f = to_file(k);

	fput(f->file);
	kfree_rcu(f, rcu);
}

const struct kobj_type llc_file_ktype = {
	.release = llc_file_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = llc_file_groups,
};

/* files/<id>/ and its loops/ directory, which loops.c fills. */
int llc_sysfs_file_add(struct llc_file *f)
{
	int err;

	INIT_LIST_HEAD(&f->loops);
	err = kobject_init_and_add(&f->kobj, &llc_file_ktype, llc_files_kobj, "%llu", f->id);
	if (!err) {
		f->loops_kobj = kobject_create_and_add("loops", &f->kobj);
		err = f->loops_kobj ? 0 : -ENOMEM;
	}
	if (err)
		kobject_put(&f->kobj);
	else
		llc_loops_kick();
	return err;
}

int llc_sysfs_init(void)
{
	int i, err;

	for (i = 0; i < ARRAY_SIZE(llc_stat_attrs); i++)
		llc_stat_list[i] = &llc_stat_attrs[i].attr.attr;
	llc_kobj = kobject_create_and_add("llmcache", kernel_kobj);
	if (!llc_kobj)
		return -ENOMEM;
	err = sysfs_create_group(llc_kobj, &llc_group);
	if (!err)
		err = sysfs_create_group(llc_kobj, &llc_stats_group);
	if (!err)
		err = sysfs_create_group(llc_kobj, &llc_sizing_group);
	if (!err)
		err = sysfs_create_group(llc_kobj, &llc_auto_group);
	if (!err) {
		llc_files_kobj = kobject_create_and_add("files", llc_kobj);
		if (!llc_files_kobj)
			err = -ENOMEM;
	}
	if (err)
		kobject_put(llc_kobj); /* removes the groups with the directory */
	return err;
}

void llc_sysfs_exit(void)
{
	llc_loops_exit();
	kobject_put(llc_files_kobj);
	kobject_put(llc_kobj);
}

// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * /sys/kernel/llmcache/kv/: the statistics of the KV service (llmcached), which keeps the KV cache of
 * LLM sessions in a CPU pool and a storage pool and scores tokens where their keys are. The module does
 * not see the KV traffic itself: llmcached pushes its totals through LLMCACHE_IOC_KV_STATS on
 * /dev/llmcache (root only) about once a second and when it stops, and this file keeps the last push
 * and shows it one value per file (Documentation/ABI/testing/sysfs-kernel-llmcache):
 *   kv/{sessions,beta_milli,selects,pushes,last_push_ns}
 *   kv/cpu/{bytes,tokens,spills,restores,bus_bytes,kernel_runs,scored_tokens,score_latency_ns}
 *   kv/storage/ the same for the storage pool.
 * A push with the wrong size, flags or reserved words set is refused with -EINVAL and changes nothing.
 */
#include <linux/kobject.h>
#include <linux/ktime.h>
#include <linux/mutex.h>
#include <linux/sysfs.h>
#include <linux/uaccess.h>
#include "internal.h"
#include "kv_stats.h"

static DEFINE_MUTEX(llc_kv_lock);
static struct llmcache_ioc_kv_stats llc_kv; /* the last push */
static u64 llc_kv_pushes, llc_kv_last_push_ns;
static struct kobject *llc_kv_kobj;

static ssize_t llc_kv_emit(char *buf, const u64 *v)
{
	u64 x;

	mutex_lock(&llc_kv_lock);
	x = *v;
	mutex_unlock(&llc_kv_lock);
	return sysfs_emit(buf, "%llu\n", x);
}

#define LLC_KV_ATTR(name, expr)								\
static ssize_t name##_show(struct kobject *k, struct kobj_attribute *a, char *buf)	\
{											\
	u64 v;										\
											\
	mutex_lock(&llc_kv_lock);							\
	v = (expr);									\
	mutex_unlock(&llc_kv_lock);							\
	return sysfs_emit(buf, "%llu\n", v);						\
}											\
static struct kobj_attribute name##_attr = __ATTR_RO(name)

LLC_KV_ATTR(sessions, llc_kv.sessions);
LLC_KV_ATTR(beta_milli, llc_kv.beta_milli);
LLC_KV_ATTR(selects, llc_kv.selects);
LLC_KV_ATTR(pushes, llc_kv_pushes);
LLC_KV_ATTR(last_push_ns, llc_kv_last_push_ns);

static struct attribute *llc_kv_attrs[] = {
	&sessions_attr.attr, &beta_milli_attr.attr, &selects_attr.attr, &pushes_attr.attr, &last_push_ns_attr.attr,
	NULL,
};

/* One file per field and pool: kv/<pool>/<field>. */
#define LLC_KV_POOL_ATTR(pl, idx, field)							\
static ssize_t pl##_##field##_show(struct kobject *k, struct kobj_attribute *a, char *buf)	\
{												\
	return llc_kv_emit(buf, &llc_kv.pool[idx].field);					\
}												\
static struct kobj_attribute pl##_##field##_attr = __ATTR(field, 0444, pl##_##field##_show, NULL)

#define LLC_KV_POOL(pl, idx)							\
LLC_KV_POOL_ATTR(pl, idx, bytes);						\
LLC_KV_POOL_ATTR(pl, idx, tokens);						\
LLC_KV_POOL_ATTR(pl, idx, spills);						\
LLC_KV_POOL_ATTR(pl, idx, restores);						\
LLC_KV_POOL_ATTR(pl, idx, bus_bytes);						\
LLC_KV_POOL_ATTR(pl, idx, kernel_runs);					\
LLC_KV_POOL_ATTR(pl, idx, scored_tokens);					\
LLC_KV_POOL_ATTR(pl, idx, score_latency_ns);					\
static struct attribute *llc_kv_##pl##_attrs[] = {				\
	&pl##_bytes_attr.attr, &pl##_tokens_attr.attr, &pl##_spills_attr.attr,	\
	&pl##_restores_attr.attr, &pl##_bus_bytes_attr.attr,			\
	&pl##_kernel_runs_attr.attr, &pl##_scored_tokens_attr.attr,		\
	&pl##_score_latency_ns_attr.attr, NULL,					\
};										\
static const struct attribute_group llc_kv_##pl##_group = {			\
	.name = #pl,								\
	.attrs = llc_kv_##pl##_attrs,						\
}

LLC_KV_POOL(cpu, LLMCACHE_KV_POOL_CPU);
LLC_KV_POOL(storage, LLMCACHE_KV_POOL_STORAGE);

static const struct attribute_group llc_kv_group = { .attrs = llc_kv_attrs };
static const struct attribute_group *llc_kv_groups[] = {
	&llc_kv_group, &llc_kv_cpu_group, &llc_kv_storage_group, NULL,
};

long llc_kv_push(void __user *arg)
{
	struct llmcache_ioc_kv_stats st;
	int i;

	if (copy_from_user(&st, arg, sizeof(st)))
		return -EFAULT;
	if (st.size != sizeof(st) || st.flags)
		return -EINVAL;
	for (i = 0; i < ARRAY_SIZE(st.reserved); i++)
		if (st.reserved[i])
			return -EINVAL;
	mutex_lock(&llc_kv_lock);
	llc_kv = st;
	llc_kv_pushes++;
	llc_kv_last_push_ns = ktime_get_ns();
	mutex_unlock(&llc_kv_lock);
	return 0;
}

int llc_kv_init(void)
{
	int err;

	llc_kv_kobj = kobject_create_and_add("kv", llc_sysfs_root());
	if (!llc_kv_kobj)
		return -ENOMEM;
	err = sysfs_create_groups(llc_kv_kobj, llc_kv_groups);
	if (err) {
		kobject_put(llc_kv_kobj);
		llc_kv_kobj = NULL;
	}
	return err;
}

void llc_kv_exit(void)
{
	kobject_put(llc_kv_kobj); /* removes the groups with the directory */
	llc_kv_kobj = NULL;
}

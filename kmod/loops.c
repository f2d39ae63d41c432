// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Per-loop sizing: the sizing rule of Kim, Lee and Bahn applied to every live LOOP sequence of the
 * registered files. For a loop of N blocks, storage bandwidth BW (blocks/s) and allowed fetch delay T:
 *   s_min = max(0, N - BW*T)   (llc_size_min_blocks), the cached blocks it needs for no stall;
 *   deficit = max(0, s_min - pinned);
 *   stall_ns = max(0, (N - pinned)/BW - T)   (llc_stall_ns), the stall per iteration it should see
 *   with only its pinned blocks cached (~0 when BW is unknown).
 *
 * BW is the sysfs tunable bw when set, else measured from the rate at which misses of registered files
 * are served. A miss is a page entering the page cache (the add tracepoint); readahead adds a batch of
 * pages and the reader, if it waits for storage, comes back for the next batch once the previous one
 * has arrived. So the time between two consecutive add events is the time storage took to serve the
 * first one's pages, provided the gap is short (LLC_BW_GAP_NS): a longer gap is compute or idle time,
 * and that pair is not counted. bw_measured = sum of pages / sum of those gaps, with both sums halved
 * whenever the time passes LLC_BW_DECAY_NS so that it follows the device. It is the device's rate
 * when reads wait for storage and a lower bound otherwise (a reader that computes between batches
 * shorter than the gap makes it look slower): a lower BW only makes s_min larger, never a stall.
 *
 * T is the sysfs tunable t_ns when set, else measured: the shortest period (wall time per iteration)
 * of a live loop of a registered file, since a token runs every per-token loop once. A period includes
 * the stalls of its iteration, so this overestimates the compute time of a loop that stalls; set t_ns
 * when the per-token time is known.
 *
 * Tools read a consistent table through LLMCACHE_IOC_LOOPS (all loops copied under one hold of the
 * core's lock, pins counted while the pin worker cannot run). sysfs shows one value per file under
 * files/<id>/loops/<seq>/ (seq: the core's sequence id, stable for the loop's life); a worker
 * creates and removes those directories in process context every second while files are registered,
 * and their values are computed when read.
 */
#include <linux/math64.h>
#include <linux/slab.h>
#include <linux/workqueue.h>
#include "internal.h"

#define LLC_BW_GAP_NS (20 * NSEC_PER_MSEC) /* longer between two misses: not busy serving them */
#define LLC_BW_DECAY_NS (2 * NSEC_PER_SEC) /* halve the sums past this much busy time */
#define LLC_LOOPS_IOC_MAX 4096             /* entries one LLMCACHE_IOC_LOOPS returns at most */
#define LLC_LOOPS_PER_FILE 64              /* loop directories per file in sysfs at most */
#define LLC_LOOPS_SYNC_MAX 1024            /* loops the sysfs worker looks at */

/* The miss-rate estimator, under llc.lock. */
static struct {
	u64 last_ns, last_blocks; /* the previous add event */
	u64 busy_ns, blocks;      /* decayed sums */
} llc_bw;

static u64 llc_t_measured; /* the shortest token time, llc_loop_period_ns(), updated by llc_loops_collect */

void llc_bw_sample(u64 blocks, u64 now_ns)
{
	u64 gap = now_ns > llc_bw.last_ns ? now_ns - llc_bw.last_ns : 0;

	lockdep_assert_held(&llc.lock);
	if (llc_bw.last_ns && gap && gap <= LLC_BW_GAP_NS) {
		llc_bw.busy_ns += gap;
		llc_bw.blocks += llc_bw.last_blocks;
		if (llc_bw.busy_ns > LLC_BW_DECAY_NS) {
			llc_bw.busy_ns >>= 1;
			llc_bw.blocks >>= 1;
		}
	}
	llc_bw.last_ns = now_ns;
	llc_bw.last_blocks = blocks;
}

/* Bytes per second misses were served at; 0 before a millisecond of it was seen. */
static u64 llc_bw_measured(void)
{
	unsigned long flags;
	u64 busy, blocks;

	spin_lock_irqsave(&llc.lock, flags);
	busy = llc_bw.busy_ns;
	blocks = llc_bw.blocks;
	spin_unlock_irqrestore(&llc.lock, flags);
	return busy >= NSEC_PER_MSEC ? mul_u64_u64_div_u64(blocks << LLMCACHE_BLOCK_SHIFT, NSEC_PER_SEC, busy) : 0;
}

/* The BW (blocks/s) and T the rule uses now, and LLMCACHE_LOOPS_* saying which were measured. */
static u32 llc_sizing_params(u64 *bw_blocks, u64 *t_ns)
{
	u64 bw = READ_ONCE(llc.bw), t = READ_ONCE(llc.t_ns);
	u32 flags = 0;

	if (!bw) {
		bw = llc_bw_measured();
		flags |= LLMCACHE_LOOPS_BW_MEASURED;
	}
	if (!t) {
		t = READ_ONCE(llc_t_measured);
		flags |= LLMCACHE_LOOPS_T_MEASURED;
	}
	*bw_blocks = bw >> LLMCACHE_BLOCK_SHIFT;
	*t_ns = t;
	return flags;
}

/* Pins of f in blocks [first, first + n); pins are keyed by page index, a page being a block here. */
static u64 llc_count_pins(struct llc_file *f, u64 first, u64 n)
{
	struct folio *folio;
	unsigned long index;
	u64 pinned = 0;

	xa_for_each_range(&f->pins, index, folio, first, first + n - 1)
		pinned++;
	return pinned;
}

/* Fill the sizing part of l from its blocks and pins. */
static void llc_loop_size(struct llmcache_loop *l, u64 bw_blocks, u64 t_ns)
{
	l->s_min = llc_size_min_blocks(l->blocks, bw_blocks, t_ns);
	l->deficit = l->s_min > l->pinned ? l->s_min - l->pinned : 0;
	l->stall_ns = llc_stall_ns(l->blocks, l->pinned, bw_blocks, t_ns);
}

static void llc_loop_fill(struct llmcache_loop *l, const struct llc_seq *s, u16 id)
{
	memset(l, 0, sizeof(*l));
	l->file_id = s->file;
	l->seq = id;
	l->first_block = s->start;
	l->blocks = s->end - s->start + 1;
	l->period_ns = s->period_ns;
	l->iterations = s->iterations;
}

/*
 * The live loops of registered files, by file id then first block: up to max into out (sizing not
 * applied, pinned left 0), and files[i] the registered file of out[i]. Returns how many there are.
 * Updates llc_t_measured. Caller holds llc_reg_mutex, so the registered set cannot change.
 */
static u32 llc_loops_collect(struct llmcache_loop *out, struct llc_file **files, u32 max)
{
	struct llc_file **reg, *f;
	unsigned long flags;
	u32 nreg = 0, total = 0, lo, hi, mid, i;
	u64 t_min = 0, t;
	u16 id;

	lockdep_assert_held(&llc_reg_mutex);
	if (!llc.nr_files)
		goto out;
	reg = kmalloc_array(llc.nr_files, sizeof(*reg), GFP_KERNEL);
	if (!reg)
		goto out;
	list_for_each_entry(f, &llc_files_list, list) /* registration order: increasing ids */
		reg[nreg++] = f;
	spin_lock_irqsave(&llc.lock, flags);
	for (id = llc_first(llc.core, LLMCACHE_CLASS_LOOP); id != LLC_SEQ_NONE; id = llc_next(llc.core, id)) {
		const struct llc_seq *s = llc_seq_get(llc.core, id);

		for (lo = 0, hi = nreg; lo < hi;) {
			mid = (lo + hi) / 2;
			if (reg[mid]->id < s->file)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == nreg || reg[lo]->id != s->file)
			continue; /* a loop of a file unregistered since */
		t = llc_loop_period_ns(s);
		if (t && (!t_min || t < t_min))
			t_min = t;
		if (total < max) {
			llc_loop_fill(&out[total], s, id);
			files[total] = reg[lo];
		}
		total++;
	}
	spin_unlock_irqrestore(&llc.lock, flags);
	kfree(reg);
	/* Insertion sort by (file, first block): tables are short and mostly in order already. */
	for (i = 1; i < min(total, max); i++) {
		struct llmcache_loop l = out[i];
		struct llc_file *lf = files[i];

		for (lo = i; lo && (out[lo - 1].file_id > l.file_id ||
				    (out[lo - 1].file_id == l.file_id && out[lo - 1].first_block > l.first_block)); lo--) {
			out[lo] = out[lo - 1];
			files[lo] = files[lo - 1];
		}
		out[lo] = l;
		files[lo] = lf;
	}
out:
	WRITE_ONCE(llc_t_measured, t_min);
	return total;
}

long llc_loops_ioctl(void __user *arg)
{
	struct llmcache_ioc_loops req;
	struct llmcache_loop *out = NULL;
	struct llc_file **files = NULL;
	u64 bw_blocks, t_ns;
	u32 n, i;
	long err = 0;

	if (copy_from_user(&req, arg, sizeof(req)))
		return -EFAULT;
	if (req.flags || (req.max && !req.loops))
		return -EINVAL;
	n = min_t(u32, req.max, LLC_LOOPS_IOC_MAX);
	if (n) {
		out = kvcalloc(n, sizeof(*out), GFP_KERNEL);
		files = kvcalloc(n, sizeof(*files), GFP_KERNEL);
		if (!out || !files) {
			err = -ENOMEM;
			goto free;
		}
	}
	mutex_lock(&llc_reg_mutex);
	req.total = llc_loops_collect(out, files, n);
	req.count = min(req.total, n);
	for (i = 0; i < req.count; i++)
		out[i].pinned = llc_count_pins(files[i], out[i].first_block, out[i].blocks);
	mutex_unlock(&llc_reg_mutex);
	req.flags = llc_sizing_params(&bw_blocks, &t_ns);
	for (i = 0; i < req.count; i++)
		llc_loop_size(&out[i], bw_blocks, t_ns);
	req.bw = bw_blocks << LLMCACHE_BLOCK_SHIFT;
	req.t_ns = t_ns;
	req.bw_measured = llc_bw_measured();
	req.t_measured_ns = READ_ONCE(llc_t_measured);
	if ((req.count && copy_to_user(u64_to_user_ptr(req.loops), out, req.count * sizeof(*out))) ||
	    copy_to_user(arg, &req, sizeof(req)))
		err = -EFAULT;
free:
	kvfree(out);
	kvfree(files);
	return err;
}

/* ---- sysfs: files/<id>/loops/<seq>/ and sizing/ ---------------------------------------------------- */

struct llc_loop_obj {
	struct kobject kobj;
	struct list_head node; /* f->loops */
	struct llc_file *f;    /* alive while this object is: the object holds its parent directory */
	u16 seq;
	bool seen;
};

struct llc_loop_attr {
	struct kobj_attribute attr;
	size_t off; /* of the value in struct llmcache_loop */
};

static ssize_t llc_loop_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	struct llc_loop_obj *o = container_of(k, struct llc_loop_obj, kobj);
	const struct llc_seq *s;
	struct llmcache_loop l;
	unsigned long flags;
	u64 bw_blocks, t_ns;
	bool live;

	spin_lock_irqsave(&llc.lock, flags);
	s = llc_seq_get(llc.core, o->seq);
	live = s && s->live && s->cls == LLMCACHE_CLASS_LOOP && s->file == o->f->id;
	if (live)
		llc_loop_fill(&l, s, o->seq);
	spin_unlock_irqrestore(&llc.lock, flags);
	if (!live)
		return -ENOENT; /* the loop ended: its directory goes at the next refresh */
	l.pinned = llc_count_pins(o->f, l.first_block, l.blocks);
	llc_sizing_params(&bw_blocks, &t_ns);
	llc_loop_size(&l, bw_blocks, t_ns);
	return sysfs_emit(buf, "%llu\n", *(u64 *)((char *)&l + container_of(a, struct llc_loop_attr, attr)->off));
}

#define LLC_LOOP_ATTR(n) \
	{ .attr = __ATTR(n, 0444, llc_loop_show, NULL), .off = offsetof(struct llmcache_loop, n) }
static struct llc_loop_attr llc_loop_vals[] = {
	LLC_LOOP_ATTR(first_block), LLC_LOOP_ATTR(blocks), LLC_LOOP_ATTR(period_ns), LLC_LOOP_ATTR(iterations),
	LLC_LOOP_ATTR(s_min), LLC_LOOP_ATTR(pinned), LLC_LOOP_ATTR(deficit), LLC_LOOP_ATTR(stall_ns),
};
static struct attribute *llc_loop_attrs[] = {
	&llc_loop_vals[0].attr.attr, &llc_loop_vals[1].attr.attr, &llc_loop_vals[2].attr.attr,
	&llc_loop_vals[3].attr.attr, &llc_loop_vals[4].attr.attr, &llc_loop_vals[5].attr.attr,
	&llc_loop_vals[6].attr.attr, &llc_loop_vals[7].attr.attr, NULL,
};
ATTRIBUTE_GROUPS(llc_loop);

static void llc_loop_release(struct kobject *k)
{
	kfree(container_of(k, struct llc_loop_obj, kobj));
}

static const struct kobj_type llc_loop_ktype = {
	.release = llc_loop_release,
	.sysfs_ops = &kobj_sysfs_ops,
	.default_groups = llc_loop_groups,
};

static void llc_loop_del(struct llc_loop_obj *o)
{
	list_del(&o->node);
	kobject_put(&o->kobj);
}

void llc_loops_file_del(struct llc_file *f)
{
	struct llc_loop_obj *o, *tmp;

	lockdep_assert_held(&llc_reg_mutex);
	list_for_each_entry_safe(o, tmp, &f->loops, node)
		llc_loop_del(o);
	kobject_put(f->loops_kobj); /* drops its reference to f's directory */
	f->loops_kobj = NULL;
}

static struct llmcache_loop llc_sync_loops[LLC_LOOPS_SYNC_MAX]; /* under llc_reg_mutex */
static struct llc_file *llc_sync_files[LLC_LOOPS_SYNC_MAX];

/* Make every file's loops/ directory list its live loops (at most LLC_LOOPS_PER_FILE, first ones). */
static void llc_loops_sync(void)
{
	struct llc_loop_obj *o, *tmp;
	struct llc_file *f;
	u32 n, i, per_file = 0;

	lockdep_assert_held(&llc_reg_mutex);
	n = min_t(u32, llc_loops_collect(llc_sync_loops, llc_sync_files, LLC_LOOPS_SYNC_MAX), LLC_LOOPS_SYNC_MAX);
	list_for_each_entry(f, &llc_files_list, list)
		list_for_each_entry(o, &f->loops, node)
			o->seen = false;
	for (i = 0; i < n; i++) {
		f = llc_sync_files[i];
		per_file = i && f == llc_sync_files[i - 1] ? per_file + 1 : 0;
		if (per_file >= LLC_LOOPS_PER_FILE || !f->loops_kobj)
			continue;
		list_for_each_entry(o, &f->loops, node)
			if (o->seq == llc_sync_loops[i].seq)
				break;
		if (!list_entry_is_head(o, &f->loops, node)) {
			o->seen = true;
			continue;
		}
		o = kzalloc(sizeof(*o), GFP_KERNEL);
		if (!o)
			break;
		o->f = f;
		o->seq = llc_sync_loops[i].seq;
		o->seen = true;
		if (kobject_init_and_add(&o->kobj, &llc_loop_ktype, f->loops_kobj, "%u", o->seq)) {
			kobject_put(&o->kobj);
			break;
		}
		list_add_tail(&o->node, &f->loops);
	}
	list_for_each_entry(f, &llc_files_list, list)
		list_for_each_entry_safe(o, tmp, &f->loops, node)
			if (!o->seen)
				llc_loop_del(o);
}

static void llc_loops_worker(struct work_struct *w);
static DECLARE_DELAYED_WORK(llc_loops_work, llc_loops_worker);

static void llc_loops_worker(struct work_struct *w)
{
	mutex_lock(&llc_reg_mutex);
	llc_loops_sync();
	if (llc.nr_files)
		schedule_delayed_work(&llc_loops_work, HZ);
	mutex_unlock(&llc_reg_mutex);
}

/* A file was registered: refresh within a second, and every second while files are registered. */
void llc_loops_kick(void)
{
	schedule_delayed_work(&llc_loops_work, HZ);
}

void llc_loops_exit(void)
{
	cancel_delayed_work_sync(&llc_loops_work);
}

static ssize_t bw_measured_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%llu\n", llc_bw_measured());
}

static ssize_t t_measured_ns_show(struct kobject *k, struct kobj_attribute *a, char *buf)
{
	return sysfs_emit(buf, "%llu\n", READ_ONCE(llc_t_measured));
}

static struct kobj_attribute bw_measured_attr = __ATTR_RO(bw_measured);
static struct kobj_attribute t_measured_ns_attr = __ATTR_RO(t_measured_ns);
static struct attribute *llc_sizing_attrs[] = { &bw_measured_attr.attr, &t_measured_ns_attr.attr, NULL };
const struct attribute_group llc_sizing_group = { .name = "sizing", .attrs = llc_sizing_attrs };

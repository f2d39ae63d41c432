// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Where llmcache sees page-cache accesses, chosen at load time by probing the running kernel:
 * - "tracepoint" (6.10+): filemap:mm_filemap_get_pages (buffered reads, hits included),
 *   mm_filemap_map_pages (fault-around) and mm_filemap_fault (mmap faults), attached by name;
 * - "kprobe" (6.1): kprobes on filemap_read, filemap_map_pages and filemap_fault give the same signal.
 * In both modes filemap:mm_filemap_add_to_page_cache / mm_filemap_delete_from_page_cache report pages
 * entering and leaving the page cache. The module parameter hooks=kprobe forces the kprobe mode.
 */
#include <linux/kprobes.h>
#include <linux/mm.h>
#include <linux/pagemap.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <linux/uio.h>
#include "internal.h"

/* mm_filemap_get_pages: once per batch of a buffered read, with what remains of the request. */
static void llc_tp_read(void *data, struct address_space *mapping, pgoff_t index, pgoff_t last_index)
{
	llc_feed_access(mapping, index, last_index, LLC_ACCESS_REQUEST);
}

/* mm_filemap_map_pages: the pages fault-around mapped. */
static void llc_tp_map(void *data, struct address_space *mapping, pgoff_t index, pgoff_t last_index)
{
	llc_feed_access(mapping, index, last_index, LLC_ACCESS_MAPPED);
}

static void llc_tp_fault(void *data, struct address_space *mapping, pgoff_t index)
{
	llc_feed_access(mapping, index, index, LLC_ACCESS_FAULT);
}

static void llc_tp_add(void *data, struct folio *folio)
{
	llc_feed_cache(folio, true);
}

static void llc_tp_delete(void *data, struct folio *folio)
{
	llc_feed_cache(folio, false);
}

struct llc_tp {
	const char *name;
	void *probe;
	bool access;          /* an access hook, replaced by kprobes where missing */
	struct tracepoint *tp; /* found by name */
	bool attached;
};

static struct llc_tp llc_tps[] = {
	{ "mm_filemap_get_pages", llc_tp_read, true },
	{ "mm_filemap_map_pages", llc_tp_map, true },
	{ "mm_filemap_fault", llc_tp_fault, true },
	{ "mm_filemap_add_to_page_cache", llc_tp_add, false },
	{ "mm_filemap_delete_from_page_cache", llc_tp_delete, false },
};

static void llc_tp_lookup(struct tracepoint *tp, void *priv)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(llc_tps); i++)
		if (!strcmp(tp->name, llc_tps[i].name))
			llc_tps[i].tp = tp;
}

/* filemap_read(struct kiocb *iocb, struct iov_iter *iter, ssize_t already_read) */
static int llc_kp_read(struct kprobe *p, struct pt_regs *regs)
{
	struct kiocb *iocb;
	struct address_space *mapping;
	loff_t pos, size;
	size_t count;

	if (!static_branch_unlikely(&llc_active))
		return 0;
	iocb = (struct kiocb *)regs_get_kernel_argument(regs, 0);
	count = iov_iter_count((struct iov_iter *)regs_get_kernel_argument(regs, 1));
	mapping = iocb->ki_filp->f_mapping;
	pos = iocb->ki_pos;
	size = i_size_read(mapping->host);
	if (!count || pos >= size)
		return 0;
	count = min_t(loff_t, count, size - pos);
	llc_feed_access(mapping, pos >> PAGE_SHIFT, (pos + count - 1) >> PAGE_SHIFT, LLC_ACCESS_READ);
	return 0;
}

/* filemap_fault(struct vm_fault *vmf) */
static int llc_kp_fault(struct kprobe *p, struct pt_regs *regs)
{
	struct vm_fault *vmf;

	if (!static_branch_unlikely(&llc_active))
		return 0;
	vmf = (struct vm_fault *)regs_get_kernel_argument(regs, 0);
	if (vmf->vma->vm_file)
		llc_feed_access(vmf->vma->vm_file->f_mapping, vmf->pgoff, vmf->pgoff, LLC_ACCESS_FAULT);
	return 0;
}

/* filemap_map_pages(struct vm_fault *vmf, pgoff_t start_pgoff, pgoff_t end_pgoff): fault-around */
static int llc_kp_map(struct kprobe *p, struct pt_regs *regs)
{
	struct vm_fault *vmf;
	struct address_space *mapping;
	pgoff_t first, last;
	loff_t size;

	if (!static_branch_unlikely(&llc_active))
		return 0;
	vmf = (struct vm_fault *)regs_get_kernel_argument(regs, 0);
	if (!vmf->vma->vm_file)
		return 0;
	mapping = vmf->vma->vm_file->f_mapping;
	first = regs_get_kernel_argument(regs, 1);
	last = regs_get_kernel_argument(regs, 2);
	size = i_size_read(mapping->host);
	if (!size)
		return 0;
	last = min_t(pgoff_t, last, (size - 1) >> PAGE_SHIFT);
	if (first <= last)
		llc_feed_access(mapping, first, last, LLC_ACCESS_AROUND);
	return 0;
}

static struct kprobe llc_kprobes[] = {
	{ .symbol_name = "filemap_read", .pre_handler = llc_kp_read },
	{ .symbol_name = "filemap_map_pages", .pre_handler = llc_kp_map },
	{ .symbol_name = "filemap_fault", .pre_handler = llc_kp_fault },
};
static struct kprobe *llc_kprobe_ptrs[ARRAY_SIZE(llc_kprobes)];
static bool llc_kprobes_on;

int llc_hooks_init(const char *want)
{
	bool have_access = true;
	int i, err;

	if (strcmp(want, "auto") && strcmp(want, "tracepoint") && strcmp(want, "kprobe")) {
		pr_err("llmcache: hooks=%s: say auto, tracepoint or kprobe\n", want);
		return -EINVAL;
	}
	for_each_kernel_tracepoint(llc_tp_lookup, NULL);
	for (i = 0; i < ARRAY_SIZE(llc_tps); i++) {
		if (!llc_tps[i].tp && !llc_tps[i].access) {
			pr_err("llmcache: tracepoint filemap:%s not found\n", llc_tps[i].name);
			return -ENOENT;
		}
		if (!llc_tps[i].tp)
			have_access = false;
	}
	if (!have_access && !strcmp(want, "tracepoint")) {
		pr_err("llmcache: hooks=tracepoint but this kernel lacks the filemap access tracepoints\n");
		return -ENOENT;
	}
	llc.hook_mode = have_access && strcmp(want, "kprobe") ? LLMCACHE_HOOK_TRACEPOINT : LLMCACHE_HOOK_KPROBE;

	if (llc.hook_mode == LLMCACHE_HOOK_KPROBE) {
		for (i = 0; i < ARRAY_SIZE(llc_kprobes); i++)
			llc_kprobe_ptrs[i] = &llc_kprobes[i];
		err = register_kprobes(llc_kprobe_ptrs, ARRAY_SIZE(llc_kprobe_ptrs));
		if (err) {
			pr_err("llmcache: kprobes on filemap_read/map_pages/fault failed: %d\n", err);
			return err;
		}
		llc_kprobes_on = true;
	}
	for (i = 0; i < ARRAY_SIZE(llc_tps); i++) {
		if (llc_tps[i].access && llc.hook_mode != LLMCACHE_HOOK_TRACEPOINT)
			continue;
		err = tracepoint_probe_register(llc_tps[i].tp, llc_tps[i].probe, NULL);
		if (err) {
			pr_err("llmcache: attaching to filemap:%s failed: %d\n", llc_tps[i].name, err);
			llc_hooks_exit();
			return err;
		}
		llc_tps[i].attached = true;
	}
	return 0;
}

void llc_hooks_exit(void)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(llc_tps); i++)
		if (llc_tps[i].attached)
			tracepoint_probe_unregister(llc_tps[i].tp, llc_tps[i].probe, NULL);
	if (llc_kprobes_on)
		unregister_kprobes(llc_kprobe_ptrs, ARRAY_SIZE(llc_kprobe_ptrs));
	llc_kprobes_on = false;
	for (i = 0; i < ARRAY_SIZE(llc_tps); i++)
		llc_tps[i].attached = false;
	tracepoint_synchronize_unregister();
}

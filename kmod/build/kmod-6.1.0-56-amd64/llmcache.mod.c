#include <linux/module.h>
#define INCLUDE_VERMAGIC
#include <linux/build-salt.h>
#include <linux/elfnote-lto.h>
#include <linux/export-internal.h>
#include <linux/vermagic.h>
#include <linux/compiler.h>

BUILD_SALT;
BUILD_LTO_INFO;

MODULE_INFO(vermagic, VERMAGIC_STRING);
MODULE_INFO(name, KBUILD_MODNAME);

__visible struct module __this_module
__section(".gnu.linkonce.this_module") = {
	.name = KBUILD_MODNAME,
	.init = init_module,
#ifdef CONFIG_MODULE_UNLOAD
	.exit = cleanup_module,
#endif
	.arch = MODULE_ARCH_INIT,
};

#ifdef CONFIG_RETPOLINE
MODULE_INFO(retpoline, "Y");
#endif


static const struct modversion_info ____versions[]
__used __section("__versions") = {
	{ 0x112a62ad, "tracepoint_probe_unregister" },
	{ 0x88db9f48, "__check_object_size" },
	{ 0x47978cc, "misc_deregister" },
	{ 0x13c49cc2, "_copy_from_user" },
	{ 0x8d522714, "__rcu_read_lock" },
	{ 0xc5b6f236, "queue_work_on" },
	{ 0x1b6865c, "xa_get_mark" },
	{ 0xabe67060, "get_pid_task" },
	{ 0x8dfe087e, "__mmap_lock_do_trace_acquire_returned" },
	{ 0xe02c9c92, "__xa_erase" },
	{ 0x1057a279, "bsearch" },
	{ 0x7d27d33f, "fget" },
	{ 0x86fd1fa5, "__put_task_struct" },
	{ 0xbb3aea54, "invalidate_mapping_pages" },
	{ 0x97a7fc84, "register_shrinker" },
	{ 0xbad3cecb, "sysfs_create_groups" },
	{ 0x3b6c41ea, "kstrtouint" },
	{ 0x37a0cba, "kfree" },
	{ 0xcb2afe84, "kernel_kobj" },
	{ 0xc14cd9d8, "find_get_pid" },
	{ 0xb37fa78b, "__pagevec_release" },
	{ 0x970f9df6, "__tracepoint_mmap_lock_acquire_returned" },
	{ 0xa1bce3f0, "synchronize_srcu" },
	{ 0x34db050b, "_raw_spin_lock_irqsave" },
	{ 0xa59c5e71, "__tracepoint_mmap_lock_released" },
	{ 0xba8fbd64, "_raw_spin_lock" },
	{ 0xcbd4898c, "fortify_panic" },
	{ 0xbdfb6dbb, "__fentry__" },
	{ 0xe783e261, "sysfs_emit" },
	{ 0xb912560d, "static_key_disable" },
	{ 0x65487097, "__x86_indirect_thunk_rax" },
	{ 0x622c7922, "register_oom_notifier" },
	{ 0x92997ed8, "_printk" },
	{ 0x8427cc7b, "_raw_spin_lock_irq" },
	{ 0xa19b956, "__stack_chk_fail" },
	{ 0x296695f, "refcount_warn_saturate" },
	{ 0xb2fcb56d, "queue_delayed_work_on" },
	{ 0xfff3faf8, "__filemap_get_folio" },
	{ 0x9acf31c6, "mas_find" },
	{ 0xef44df72, "unregister_shrinker" },
	{ 0x58be560a, "iterate_fd" },
	{ 0x59bd07d3, "init_task" },
	{ 0xc6cbbc89, "capable" },
	{ 0x599fb41c, "kvmalloc_node" },
	{ 0x3ef022ec, "compat_ptr_ioctl" },
	{ 0xc617f82c, "unregister_oom_notifier" },
	{ 0x68f31cbd, "__list_add_valid" },
	{ 0xa1194a8a, "fput" },
	{ 0xb7c0f443, "sort" },
	{ 0x6091797f, "synchronize_rcu" },
	{ 0xb9af1d0d, "__xa_clear_mark" },
	{ 0x2469810f, "__rcu_read_unlock" },
	{ 0x8b5ecfed, "kobj_sysfs_ops" },
	{ 0xa85a3e6d, "xa_load" },
	{ 0x4dfa8d4b, "mutex_lock" },
	{ 0x44945b5a, "cgroup_get_from_fd" },
	{ 0x4b750f53, "_raw_spin_unlock_irq" },
	{ 0xf74bb274, "mod_delayed_work_on" },
	{ 0x48c32817, "kobject_init_and_add" },
	{ 0x20ba7fb1, "get_task_mm" },
	{ 0xe9af7397, "__xa_set_mark" },
	{ 0x16f71312, "sysfs_create_group" },
	{ 0xe1537255, "__list_del_entry_valid" },
	{ 0x944375db, "_totalram_pages" },
	{ 0xd35cce70, "_raw_spin_unlock_irqrestore" },
	{ 0xb6eabe37, "register_kprobes" },
	{ 0x30c6b1b0, "tracepoint_srcu" },
	{ 0xfb578fc5, "memset" },
	{ 0x5c3c7387, "kstrtoull" },
	{ 0x8cf7d651, "vfs_fadvise" },
	{ 0x844c8938, "misc_register" },
	{ 0x744e0813, "param_ops_charp" },
	{ 0x5b8239ca, "__x86_return_thunk" },
	{ 0x6b10bee1, "_copy_to_user" },
	{ 0x6d270342, "filemap_get_folios" },
	{ 0xab068b81, "kobject_create_and_add" },
	{ 0x668b19a1, "down_read" },
	{ 0xe2d5255a, "strcmp" },
	{ 0xbb9ed3bf, "mutex_trylock" },
	{ 0x7dcf4135, "__xa_insert" },
	{ 0x745a981, "xa_erase" },
	{ 0x163cc194, "check_move_unevictable_folios" },
	{ 0x34e148d7, "__mmap_lock_do_trace_start_locking" },
	{ 0xbaf22757, "kvfree_call_rcu" },
	{ 0x30b9b182, "mmput" },
	{ 0x3213f038, "mutex_unlock" },
	{ 0x9fa7184a, "cancel_delayed_work_sync" },
	{ 0x97796289, "vm_node_stat" },
	{ 0x8fa25c24, "xa_find" },
	{ 0x24b5f753, "mod_zone_page_state" },
	{ 0x2956c81b, "__tracepoint_mmap_lock_start_locking" },
	{ 0xd184be77, "__folio_put" },
	{ 0xb43f9365, "ktime_get" },
	{ 0x3c12dfe, "cancel_work_sync" },
	{ 0x2d129d4a, "__mmap_lock_do_trace_released" },
	{ 0xffeedf6a, "delayed_work_timer_fn" },
	{ 0xc07351b3, "__SCT__cond_resched" },
	{ 0x356d09a1, "unregister_kprobes" },
	{ 0xffae8e8b, "nsecs_to_jiffies" },
	{ 0xd6d0e505, "node_data" },
	{ 0xdf36914b, "xa_find_after" },
	{ 0x606e9d01, "kmalloc_trace" },
	{ 0x60a13e90, "rcu_barrier" },
	{ 0x7aa1756e, "kvfree" },
	{ 0xb5b54b34, "_raw_spin_unlock" },
	{ 0x5da9dd8, "for_each_kernel_tracepoint" },
	{ 0x53b954a2, "up_read" },
	{ 0xf8a1b589, "put_pid" },
	{ 0xeb233a45, "__kmalloc" },
	{ 0xe2c17b5d, "__SCT__might_resched" },
	{ 0x7a7caba8, "kmalloc_caches" },
	{ 0x1fb591fa, "tracepoint_probe_register" },
	{ 0x2d3385d3, "system_wq" },
	{ 0x7f68e338, "d_path" },
	{ 0x176238f7, "kobject_put" },
	{ 0x6b2b69f7, "static_key_enable" },
	{ 0x9060323f, "module_layout" },
};

MODULE_INFO(depends, "");


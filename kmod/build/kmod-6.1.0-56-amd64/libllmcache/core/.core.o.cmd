cmd_/work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o :=  gcc-12 -Wp,-MMD,/work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/.core.o.d -nostdinc -I/usr/src/linux-headers-6.1.0-56-common/arch/x86/include -I./arch/x86/include/generated -I/usr/src/linux-headers-6.1.0-56-common/include -I./include -I/usr/src/linux-headers-6.1.0-56-common/arch/x86/include/uapi -I./arch/x86/include/generated/uapi -I/usr/src/linux-headers-6.1.0-56-common/include/uapi -I./include/generated/uapi -include /usr/src/linux-headers-6.1.0-56-common/include/linux/compiler-version.h -include /usr/src/linux-headers-6.1.0-56-common/include/linux/kconfig.h -include /usr/src/linux-headers-6.1.0-56-common/include/linux/compiler_types.h -D__KERNEL__ -fmacro-prefix-map=/usr/src/linux-headers-6.1.0-56-common/= -Wall -Wundef -Werror=strict-prototypes -Wno-trigraphs -fno-strict-aliasing -fno-common -fshort-wchar -fno-PIE -Werror=implicit-function-declaration -Werror=implicit-int -Werror=return-type -Wno-format-security -std=gnu11 -mno-sse -mno-mmx -mno-sse2 -mno-3dnow -mno-avx -fcf-protection=none -m64 -falign-jumps=1 -falign-loops=1 -mno-80387 -mno-fp-ret-in-387 -mpreferred-stack-boundary=3 -mskip-rax-setup -mtune=generic -mno-red-zone -mcmodel=kernel -Wno-sign-compare -fno-asynchronous-unwind-tables -mindirect-branch=thunk-extern -mindirect-branch-register -mindirect-branch-cs-prefix -mfunction-return=thunk-extern -fno-jump-tables -mharden-sls=all -fno-delete-null-pointer-checks -Wno-frame-address -Wno-format-truncation -Wno-format-overflow -Wno-address-of-packed-member -O2 -fno-allow-store-data-races -Wframe-larger-than=2048 -fstack-protector-strong -Wno-main -Wno-unused-but-set-variable -Wno-unused-const-variable -Wno-dangling-pointer -ftrivial-auto-var-init=zero -fno-stack-clash-protection -pg -mrecord-mcount -mfentry -DCC_USING_FENTRY -Wvla -Wno-pointer-sign -Wcast-function-type -Wno-stringop-truncation -Wno-stringop-overflow -Wno-restrict -Wno-maybe-uninitialized -Wno-array-bounds -Wno-alloc-size-larger-than -Wimplicit-fallthrough=5 -fno-strict-overflow -fno-stack-check -fconserve-stack -Werror=date-time -Werror=incompatible-pointer-types -Werror=designated-init -fno-builtin-wcslen -Wno-packed-not-aligned -g -I/work/main/kmod/build/kmod-6.1.0-56-amd64 -Werror  -DMODULE  -DKBUILD_BASENAME='"core"' -DKBUILD_MODNAME='"llmcache"' -D__KBUILD_MODNAME=kmod_llmcache -c -o /work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o /work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.c   ; ./tools/objtool/objtool --hacks=jump_label --hacks=noinstr --orc --retpoline --rethunk --sls --static-call --uaccess   --module /work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o

source_/work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o := /work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.c

deps_/work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o := \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/compiler-version.h \
    $(wildcard include/config/CC_VERSION_TEXT) \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/kconfig.h \
    $(wildcard include/config/CPU_BIG_ENDIAN) \
    $(wildcard include/config/BOOGER) \
    $(wildcard include/config/FOO) \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/compiler_types.h \
    $(wildcard include/config/DEBUG_INFO_BTF) \
    $(wildcard include/config/PAHOLE_HAS_BTF_TAG) \
    $(wildcard include/config/HAVE_ARCH_COMPILER_H) \
    $(wildcard include/config/CC_HAS_ASM_INLINE) \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/compiler_attributes.h \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/compiler-gcc.h \
    $(wildcard include/config/RETPOLINE) \
    $(wildcard include/config/GCC_ASM_GOTO_OUTPUT_WORKAROUND) \
    $(wildcard include/config/ARCH_USE_BUILTIN_BSWAP) \
    $(wildcard include/config/SHADOW_CALL_STACK) \
    $(wildcard include/config/KCOV) \
  /work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.h \
  /work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/compat.h \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/types.h \
    $(wildcard include/config/HAVE_UID16) \
    $(wildcard include/config/UID16) \
    $(wildcard include/config/ARCH_DMA_ADDR_T_64BIT) \
    $(wildcard include/config/PHYS_ADDR_T_64BIT) \
    $(wildcard include/config/64BIT) \
    $(wildcard include/config/ARCH_32BIT_USTAT_F_TINODE) \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/linux/types.h \
  arch/x86/include/generated/uapi/asm/types.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/asm-generic/types.h \
  /usr/src/linux-headers-6.1.0-56-common/include/asm-generic/int-ll64.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/asm-generic/int-ll64.h \
  /usr/src/linux-headers-6.1.0-56-common/arch/x86/include/uapi/asm/bitsperlong.h \
  /usr/src/linux-headers-6.1.0-56-common/include/asm-generic/bitsperlong.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/asm-generic/bitsperlong.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/linux/posix_types.h \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/stddef.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/linux/stddef.h \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/compiler_types.h \
  /usr/src/linux-headers-6.1.0-56-common/arch/x86/include/asm/posix_types.h \
    $(wildcard include/config/X86_32) \
  /usr/src/linux-headers-6.1.0-56-common/arch/x86/include/uapi/asm/posix_types_64.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/asm-generic/posix_types.h \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/math64.h \
    $(wildcard include/config/ARCH_SUPPORTS_INT128) \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/math.h \
  /usr/src/linux-headers-6.1.0-56-common/arch/x86/include/asm/div64.h \
  /usr/src/linux-headers-6.1.0-56-common/include/asm-generic/div64.h \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/compiler.h \
    $(wildcard include/config/TRACE_BRANCH_PROFILING) \
    $(wildcard include/config/PROFILE_ALL_BRANCHES) \
    $(wildcard include/config/OBJTOOL) \
  arch/x86/include/generated/asm/rwonce.h \
  /usr/src/linux-headers-6.1.0-56-common/include/asm-generic/rwonce.h \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/kasan-checks.h \
    $(wildcard include/config/KASAN_GENERIC) \
    $(wildcard include/config/KASAN_SW_TAGS) \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/kcsan-checks.h \
    $(wildcard include/config/KCSAN) \
    $(wildcard include/config/KCSAN_WEAK_MEMORY) \
    $(wildcard include/config/KCSAN_IGNORE_ATOMICS) \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/linux/kernel.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/linux/sysinfo.h \
  /usr/src/linux-headers-6.1.0-56-common/include/linux/const.h \
  /usr/src/linux-headers-6.1.0-56-common/include/vdso/const.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/linux/const.h \
  /usr/src/linux-headers-6.1.0-56-common/include/vdso/math64.h \
  /work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/../../include/uapi/llmcache.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/linux/ioctl.h \
  arch/x86/include/generated/uapi/asm/ioctl.h \
  /usr/src/linux-headers-6.1.0-56-common/include/asm-generic/ioctl.h \
  /usr/src/linux-headers-6.1.0-56-common/include/uapi/asm-generic/ioctl.h \

/work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o: $(deps_/work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o)

$(deps_/work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o):

/work/main/kmod/build/kmod-6.1.0-56-amd64/libllmcache/core/core.o: $(wildcard ./tools/objtool/objtool)

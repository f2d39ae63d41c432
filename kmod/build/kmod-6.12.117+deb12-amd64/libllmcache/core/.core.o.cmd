savedcmd_/work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.o :=  x86_64-linux-gnu-gcc-12 -Wp,-MMD,/work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/.core.o.d -nostdinc -I/usr/src/linux-headers-6.12.117+deb12-common/arch/x86/include -I./arch/x86/include/generated -I/usr/src/linux-headers-6.12.117+deb12-common/include -I./include -I/usr/src/linux-headers-6.12.117+deb12-common/arch/x86/include/uapi -I./arch/x86/include/generated/uapi -I/usr/src/linux-headers-6.12.117+deb12-common/include/uapi -I./include/generated/uapi -include /usr/src/linux-headers-6.12.117+deb12-common/include/linux/compiler-version.h -include /usr/src/linux-headers-6.12.117+deb12-common/include/linux/kconfig.h -include /usr/src/linux-headers-6.12.117+deb12-common/include/linux/compiler_types.h -D__KERNEL__ -fmacro-prefix-map=/usr/src/linux-headers-6.12.117+deb12-common/= -std=gnu11 -fshort-wchar -funsigned-char -fno-common -fno-PIE -fno-strict-aliasing -mno-sse -mno-mmx -mno-sse2 -mno-3dnow -mno-avx -fcf-protection=branch -fno-jump-tables -m64 -falign-jumps=1 -falign-loops=1 -mno-80387 -mno-fp-ret-in-387 -mpreferred-stack-boundary=3 -mskip-rax-setup -mtune=generic -mno-red-zone -mcmodel=kernel -Wno-sign-compare -fno-asynchronous-unwind-tables -mindirect-branch=thunk-extern -mindirect-branch-register -mindirect-branch-cs-prefix -mfunction-return=thunk-extern -fno-jump-tables -mharden-sls=all -fpatchable-function-entry=16,16 -fno-delete-null-pointer-checks -O2 -fno-allow-store-data-races -fstack-protector-strong -ftrivial-auto-var-init=zero -fno-stack-clash-protection -pg -mrecord-mcount -mfentry -DCC_USING_FENTRY -falign-functions=16 -fno-strict-overflow -fno-stack-check -fconserve-stack -fno-builtin-wcslen -fno-builtin-wcslen -Wall -Wextra -Wundef -Werror=implicit-function-declaration -Werror=implicit-int -Werror=return-type -Werror=strict-prototypes -Wno-format-security -Wno-trigraphs -Wno-frame-address -Wno-address-of-packed-member -Wmissing-declarations -Wmissing-prototypes -Wframe-larger-than=2048 -Wno-main -Wno-dangling-pointer -Wvla -Wno-pointer-sign -Wcast-function-type -Wno-array-bounds -Wno-stringop-overflow -Wno-alloc-size-larger-than -Wimplicit-fallthrough=5 -Werror=date-time -Werror=incompatible-pointer-types -Werror=designated-init -Wenum-conversion -Wunused -Wno-unused-but-set-variable -Wno-unused-const-variable -Wno-packed-not-aligned -Wno-format-overflow -Wno-format-truncation -Wno-stringop-truncation -Wno-override-init -Wno-missing-field-initializers -Wno-type-limits -Wno-shift-negative-value -Wno-maybe-uninitialized -Wno-sign-compare -Wno-unused-parameter -g -I/work/main/kmod/build/kmod-6.12.117+deb12-amd64 -Werror  -DMODULE  -DKBUILD_BASENAME='"core"' -DKBUILD_MODNAME='"llmcache"' -D__KBUILD_MODNAME=kmod_llmcache -c -o /work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.o /work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.c  

source_/work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.o := /work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.c

deps_/work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.o := \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/compiler-version.h \
    $(wildcard include/config/CC_VERSION_TEXT) \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/kconfig.h \
    $(wildcard include/config/CPU_BIG_ENDIAN) \
    $(wildcard include/config/BOOGER) \
    $(wildcard include/config/FOO) \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/compiler_types.h \
    $(wildcard include/config/DEBUG_INFO_BTF) \
    $(wildcard include/config/PAHOLE_HAS_BTF_TAG) \
    $(wildcard include/config/FUNCTION_ALIGNMENT) \
    $(wildcard include/config/CC_HAS_SANE_FUNCTION_ALIGNMENT) \
    $(wildcard include/config/X86_64) \
    $(wildcard include/config/ARM64) \
    $(wildcard include/config/LD_DEAD_CODE_DATA_ELIMINATION) \
    $(wildcard include/config/LTO_CLANG) \
    $(wildcard include/config/HAVE_ARCH_COMPILER_H) \
    $(wildcard include/config/KCSAN) \
    $(wildcard include/config/CC_HAS_COUNTED_BY) \
    $(wildcard include/config/UBSAN_SIGNED_WRAP) \
    $(wildcard include/config/CC_HAS_ASM_INLINE) \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/compiler-context-analysis.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/compiler_attributes.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/compiler-gcc.h \
    $(wildcard include/config/MITIGATION_RETPOLINE) \
    $(wildcard include/config/ARCH_USE_BUILTIN_BSWAP) \
    $(wildcard include/config/SHADOW_CALL_STACK) \
    $(wildcard include/config/KCOV) \
  /work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.h \
  /work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/compat.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/types.h \
    $(wildcard include/config/HAVE_UID16) \
    $(wildcard include/config/UID16) \
    $(wildcard include/config/ARCH_DMA_ADDR_T_64BIT) \
    $(wildcard include/config/PHYS_ADDR_T_64BIT) \
    $(wildcard include/config/64BIT) \
    $(wildcard include/config/ARCH_32BIT_USTAT_F_TINODE) \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/linux/types.h \
  arch/x86/include/generated/uapi/asm/types.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/asm-generic/types.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/asm-generic/int-ll64.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/asm-generic/int-ll64.h \
  /usr/src/linux-headers-6.12.117+deb12-common/arch/x86/include/uapi/asm/bitsperlong.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/asm-generic/bitsperlong.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/asm-generic/bitsperlong.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/linux/posix_types.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/stddef.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/linux/stddef.h \
  /usr/src/linux-headers-6.12.117+deb12-common/arch/x86/include/asm/posix_types.h \
    $(wildcard include/config/X86_32) \
  /usr/src/linux-headers-6.12.117+deb12-common/arch/x86/include/uapi/asm/posix_types_64.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/asm-generic/posix_types.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/math64.h \
    $(wildcard include/config/ARCH_SUPPORTS_INT128) \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/math.h \
  /usr/src/linux-headers-6.12.117+deb12-common/arch/x86/include/asm/div64.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/asm-generic/div64.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/compiler.h \
    $(wildcard include/config/TRACE_BRANCH_PROFILING) \
    $(wildcard include/config/PROFILE_ALL_BRANCHES) \
    $(wildcard include/config/OBJTOOL) \
  arch/x86/include/generated/asm/rwonce.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/asm-generic/rwonce.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/kasan-checks.h \
    $(wildcard include/config/KASAN_GENERIC) \
    $(wildcard include/config/KASAN_SW_TAGS) \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/kcsan-checks.h \
    $(wildcard include/config/KCSAN_WEAK_MEMORY) \
    $(wildcard include/config/KCSAN_IGNORE_ATOMICS) \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/linux/kernel.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/linux/sysinfo.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/linux/const.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/vdso/const.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/linux/const.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/vdso/math64.h \
  /work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/../../include/uapi/llmcache.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/linux/ioctl.h \
  arch/x86/include/generated/uapi/asm/ioctl.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/asm-generic/ioctl.h \
  /usr/src/linux-headers-6.12.117+deb12-common/include/uapi/asm-generic/ioctl.h \

/work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.o: $(deps_/work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.o)

$(deps_/work/main/kmod/build/kmod-6.12.117+deb12-amd64/libllmcache/core/core.o):

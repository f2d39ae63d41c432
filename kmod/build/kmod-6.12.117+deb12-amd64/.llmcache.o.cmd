savedcmd_/work/main/kmod/build/kmod-6.12.117+deb12-amd64/llmcache.o := x86_64-linux-gnu-ld -m elf_x86_64 -z noexecstack --no-warn-rwx-segments   -r -o /work/main/kmod/build/kmod-6.12.117+deb12-amd64/llmcache.o @/work/main/kmod/build/kmod-6.12.117+deb12-amd64/llmcache.mod  ; ./tools/objtool/objtool --hacks=jump_label --hacks=noinstr --hacks=skylake --ibt --orc --retpoline --rethunk --sls --static-call --uaccess --prefix=16  --link  --module /work/main/kmod/build/kmod-6.12.117+deb12-amd64/llmcache.o

/work/main/kmod/build/kmod-6.12.117+deb12-amd64/llmcache.o: $(wildcard ./tools/objtool/objtool)

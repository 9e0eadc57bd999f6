# hyinfer - build, run, test.  `make run` and `make test` install missing Debian/npm packages first,
# then build in a second make, so that pkg-config runs after the -dev packages are there.
CC       ?= gcc
PKGS     := libpcre2-8 jansson yaml-0.1 libmicrohttpd
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# Open MPI (libopenmpi-dev) for multi-rank runs under mpirun (src/comm/comm.c, the only user of <mpi.h>);
# without it src/comm is a one-rank world. HY_MPI=0 builds without it where it is installed.
ifeq ($(origin HY_MPI),undefined)
HY_MPI := $(shell pkg-config --exists ompi-c 2>/dev/null && echo 1 || echo 0)
endif
ifeq ($(HY_MPI),1)
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c) -DHY_HAVE_MPI
MPI_LIBS   := $(shell pkg-config --libs ompi-c)
endif
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
SAN      ?=
ALL_CFLAGS = $(CFLAGS) $(SAN) -std=c11 -D_GNU_SOURCE -ffp-contract=off -Wall -Wextra -Werror -Wno-format-truncation -fopenmp -Isrc -Iinclude $(PKG_CFLAGS) $(MPI_CFLAGS)
LDLIBS   += $(PKG_LIBS) $(MPI_LIBS) -lm -lpthread -fopenmp $(SAN)
BUILD    ?= build

LIB_SRC  := $(shell find src -name '*.c' ! -path 'src/cli/main.c' | sort)
CLI_SRC  := src/cli/main.c
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
DEPS     := $(LIB_OBJ:.o=.d) $(BUILD)/src/cli/main.d $(BUILD)/tests/avx512_emu.d

.PHONY: FORCE print-ldlibs all deps test-deps run mpi install uninstall check test test-emu test-only unit asan fuzz bench clean
all: $(BUILD)/hyinfer

# deps: what building and running need (compiler, pkg-config, the four libraries).
# test-deps: that plus the test tooling (cmocka, clang, SIMDe, Python packages, npm packages).
deps:
	@bash scripts/install_deps.sh run

test-deps:
	@bash scripts/install_deps.sh test

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

# comm.o and what tests it are rebuilt when Open MPI comes or goes (HY_MPI changes)
$(BUILD)/hy_mpi.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(HY_MPI)' | cmp -s - $@ || echo '$(HY_MPI)' >$@
$(BUILD)/src/comm/comm.o $(BUILD)/tests/test_comm: $(BUILD)/hy_mpi.stamp
FORCE:

$(BUILD)/libhyinfer.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/hyinfer: $(BUILD)/src/cli/main.o $(BUILD)/libhyinfer.a
	@test -n "$(PKG_LIBS)" || { echo "pkg-config found none of $(PKGS): run 'make deps' (or 'make run')" >&2; exit 1; }
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

# The avx512 kernels on SIMDe's emulated intrinsics (tests/unit/avx512_emu.c): compiled once, linked
# into every unit test (test_kernels*.c test that level with it on CPUs without AVX-512).
TEST_EMU_OBJ := $(BUILD)/tests/avx512_emu.o
$(TEST_EMU_OBJ): tests/unit/avx512_emu.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Wno-psabi -Itests -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libhyinfer.a $(TEST_EMU_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests -o $@ $< $(TEST_EMU_OBJ) $(BUILD)/libhyinfer.a $(LDLIBS) -lcmocka

unit: $(TEST_BIN)

# The libraries a program linked against $(BUILD)/libhyinfer.a needs (the golden tests' C drivers).
print-ldlibs:
	@echo $(LDLIBS)

# The model-level multi-rank test program of tests/dist/test_model_mpi.sh (run under mpirun).
$(BUILD)/tests/model_mpi_test: tests/dist/model_mpi_test.c $(BUILD)/libhyinfer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libhyinfer.a $(LDLIBS)

# The multi-rank test program of tests/dist/test_comm_mpi.sh (run under mpirun; not a unit test).
$(BUILD)/tests/comm_mpi_test: tests/dist/comm_mpi_test.c $(BUILD)/libhyinfer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libhyinfer.a $(LDLIBS)

# The unit tests once more under AddressSanitizer + UBSan (separate build tree).
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" unit

# libFuzzer targets (clang); tests/run_tests.sh runs each briefly. The library sources are compiled
# once (instrumented, -fsanitize=fuzzer-no-link) into one archive every target links against.
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
# The parsers and what they call; no OpenMP runtime in the fuzz build (pragmas are ignored).
FUZZ_LIB_SRC := $(filter-out src/cli/% src/bench/%,$(LIB_SRC))
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -ffp-contract=off -g -O1 -Isrc $(PKG_CFLAGS)
FUZZ_OBJ := $(FUZZ_LIB_SRC:%.c=build-fuzz/obj/%.o)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/%)

build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c $< -o $@

build-fuzz/libfuzzlib.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^

build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c build-fuzz/libfuzzlib.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< build-fuzz/libfuzzlib.a $(PKG_LIBS) -lm -lpthread

fuzz: $(FUZZ_BIN)

-include $(FUZZ_OBJ:.o=.d)

# `make run` builds on every core (make's own -j wins when given) and says so before the compiler's
# lines start; the build takes about a minute on 2 cores.
NPROC := $(shell nproc 2>/dev/null || echo 2)
run: deps
	@echo "make run: building $(BUILD)/hyinfer with $(NPROC) jobs (about a minute on 2 cores)"
	@$(MAKE) --no-print-directory $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC)) all
	@echo "make run: running the offline job of configs/default.yaml on models/hy3-tiny"
	./$(BUILD)/hyinfer run --yaml configs/default.yaml

# `make mpi`: Open MPI (libopenmpi-dev, openmpi-bin; about 150 MB with gfortran, which Debian's
# package depends on) for multi-rank runs, then the rebuild that links it (comm.o is rebuilt when
# Open MPI comes or goes: hy_mpi.stamp).
mpi:
	@bash scripts/install_deps.sh mpi
	@$(MAKE) --no-print-directory -j$(NPROC) all

# `make install` (PREFIX=/usr/local, DESTDIR for staging): the hyinfer binary into $(PREFIX)/bin.
# The bundled models, configs and examples stay in the repository (commands take their paths).
PREFIX  ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 $(BUILD)/hyinfer $(DESTDIR)$(PREFIX)/bin/hyinfer

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/hyinfer

# `make bench`: roofline benchmark on the random-weight bench model (generated on first use, ~6.6 GB
# for the hy3 shape; not committed). BENCH_ARGS adds flags, e.g. BENCH_ARGS="--json --prompt-lens 128,512".
BENCH_MODEL ?= build/bench-hy3
BENCH_SHAPE ?= hy3
BENCH_ARGS  ?=
bench: all
	@test -f $(BENCH_MODEL)/model.safetensors || \
	  nice /usr/bin/python3 tools/make/make_bench_model.py --out $(BENCH_MODEL) --shape $(BENCH_SHAPE)
	./$(BUILD)/hyinfer bench latency -m $(BENCH_MODEL) $(BENCH_ARGS)

# `make tools`: the C micro-benchmarks of tools/bench (kernel_bench, kv_attn_bench, gptq_bench), built
# against the library into build/tools/; run e.g. `nice build/tools/kernel_bench` (not tests).
TOOLS_BIN := $(patsubst tools/bench/%.c,$(BUILD)/tools/%,$(sort $(wildcard tools/bench/*.c)))
.PHONY: tools
tools: $(TOOLS_BIN)

$(BUILD)/tools/%: tools/bench/%.c $(BUILD)/libhyinfer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libhyinfer.a $(LDLIBS)

# Test tiers (tests/run_tests.sh): check = build + layout/format checks + unit tests (a few minutes);
# test = what CI runs: check + ASan/UBSan + golden + e2e + fuzz + the fresh-machine install test;
# test-emu = the avx512 kernels' machine code in the Bochs emulator (opt-in, 3-4 minutes).
check: test-deps
	@bash tests/run_tests.sh check

test: test-deps
	@bash tests/run_tests.sh test

test-emu: test-deps
	@bash tests/run_tests.sh emu

test-only:
	@bash tests/run_tests.sh test

clean:
	rm -rf build build-asan build-fuzz

-include $(DEPS)

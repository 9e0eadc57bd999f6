# hyinfer - build, run, test.  `make run` and `make test` install missing Debian/npm packages first.
CC       ?= gcc
PKGS     := libpcre2-8 jansson yaml-0.1
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
OPT      ?= -O2
CFLAGS   ?= $(OPT) -g
SAN      ?=
ALL_CFLAGS = $(CFLAGS) $(SAN) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-format-truncation -fopenmp -Isrc -Iinclude $(PKG_CFLAGS)
LDLIBS   += $(PKG_LIBS) -lm -lpthread -fopenmp $(SAN)
BUILD    ?= build

LIB_SRC  := $(shell find src -name '*.c' ! -path 'src/cli/main.c' | sort)
CLI_SRC  := src/cli/main.c
TEST_SRC := $(sort $(wildcard tests/unit/test_*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
DEPS     := $(LIB_OBJ:.o=.d) $(BUILD)/src/cli/main.d

.PHONY: all deps run test test-only unit asan fuzz bench clean
all: $(BUILD)/hyinfer

deps:
	@bash scripts/install_deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libhyinfer.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/hyinfer: $(BUILD)/src/cli/main.o $(BUILD)/libhyinfer.a
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libhyinfer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests -o $@ $< $(BUILD)/libhyinfer.a $(LDLIBS) -lcmocka

unit: $(TEST_BIN)

# The unit tests once more under AddressSanitizer + UBSan (separate build tree).
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" unit

# libFuzzer targets (clang); tests/run_tests.sh runs each briefly.
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
fuzz:
	@mkdir -p build-fuzz
	@for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  echo "clang $$f"; \
	  clang -std=c11 -D_GNU_SOURCE -g -O1 -Isrc $(PKG_CFLAGS) -fsanitize=fuzzer,address,undefined \
	    -o build-fuzz/$$n $$f $(filter-out src/cli/%,$(LIB_SRC)) $(PKG_LIBS) -lm -lpthread || exit 1; done

run: deps all
	./$(BUILD)/hyinfer run --yaml configs/default.yaml

test: deps
	@bash tests/run_tests.sh

test-only:
	@bash tests/run_tests.sh

clean:
	rm -rf build build-asan build-fuzz

-include $(DEPS)

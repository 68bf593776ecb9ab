# caliper — build, test and sanitizer entry points.
#
#   make            build build/caliper, libcaliper.a and libcaliper-engine.a
#   make run        install deps (once), build, run the main job on the built-in engine
#   make test       unit tests (cmocka), fuzz corpus replay, end-to-end tests
#   make asan|ubsan|tsan   the same tests under a sanitizer, in build/<san>/
#   make fuzz       libFuzzer targets (clang), FUZZ_SECONDS each (default 20),
#                   each input within FUZZ_TIMEOUT s and FUZZ_RSS_MB MiB
#   make fuzz-long  the same, 10 minutes each
#   make bench      build the benchmarks in bench/ (run them one by one)
#   make compat     build llama.cpp's llama-server (cached in ~/.cache/caliper;
#                   needs the npm registry the first time) and run caliper
#                   against it (tests/compat/); never part of `make test`
#   make deps       install Debian packages (root): deps-build (what `make` and
#                   `make run` need), deps-test (what `make test` adds; it
#                   installs both itself), deps-ci (CI's other checks),
#                   deps-compat (`make compat`); prints the lists elsewhere
#   make install    binary, both libraries, public headers, caliper.pc,
#                   caliper-engine.pc, man pages (scripts/install.sh) under
#                   $(DESTDIR)$(PREFIX); BINDIR LIBDIR INCLUDEDIR MANDIR PKGCONFIGDIR
#   make check-isa  no instruction beyond baseline x86-64 outside the engine's
#                   run-time-chosen kernels (part of `make test`)
#   make test-portable  the engine's tests and a serve + run under qemu-x86_64
#                   as a Nehalem (SSE4.2) and a Haswell (AVX2) CPU
#   make dist       caliper-$(VERSION).tar.gz (builds and tests outside git)
#
# Packagers: CPPFLAGS, CFLAGS and LDFLAGS are honoured (added after the
# project's own, so theirs win); WERROR=1 makes warnings errors (CI sets it);
# WITH_MPI=auto|yes|no (auto: build caliper-mpi where mpicc is found);
# NATIVE=1 builds the engine for this CPU (-march=native) instead of the
# baseline with kernels chosen at run time.
#
# libcaliper.a is the measurement library (lib/: probe, protocol, store,
# telemetry, analysis, report, util...). libcaliper-engine.a is the reference
# engine (engine/): built for the baseline x86-64, its vector kernels are
# chosen at run time from cpuid (engine/simd.h: CAL_SIMD).
# server/ and src/ are the caliper program only (libcaliper-cli.a, not
# installed).
#
# Every directory is discovered by wildcard: a new file in lib/<module>/,
# engine/, server/, src/, tests/unit/test_*.c, tests/e2e/*.sh,
# tests/fuzz/fuzz_*.c or bench/*.c is built without touching this file.

PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
MANDIR      ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR     ?=
# The platform file set: lib/platform/$(PLATFORM).c and every lib/*/*_$(PLATFORM).c
# (lib/platform/platform.h). Detected from uname; PLATFORM=posix builds the
# generic POSIX core (poll loop, posix_spawn, no /proc) on any system, into
# build/posix, and `make test PLATFORM=posix` runs the whole suite on it.
UNAME_S  := $(shell uname -s)
NATIVE_PLATFORM := $(if $(filter Linux,$(UNAME_S)),linux,$(if $(filter Darwin,$(UNAME_S)),darwin,posix))
PLATFORM ?= $(NATIVE_PLATFORM)
PLATFORMS := linux darwin posix
ifeq ($(filter $(PLATFORM),$(PLATFORMS)),)
  $(error PLATFORM: "$(PLATFORM)" is not one of $(PLATFORMS))
endif
BUILD    ?= $(if $(filter $(PLATFORM),$(NATIVE_PLATFORM)),build,build/$(PLATFORM))
CC       ?= cc
SAN      ?=
PKGS     := libcurl jansson yajl sqlite3 openblas libmicrohttpd libcrypto libpcre2-8
# VERSION is the one place the version lives; a tarball from `make dist`
# also carries COMMIT, the commit it was made from (no git there). git is
# asked only when this directory is the top of its own work tree, so a
# tarball unpacked inside another repository does not take its commit.
VERSION  := $(shell cat VERSION 2>/dev/null || echo 0.0.0)
IN_GIT   := $(shell [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$(CURDIR)" ] && echo 1)
ifeq ($(IN_GIT),1)
  COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
  DIRTY  := $(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
else
  COMMIT := $(shell cat COMMIT 2>/dev/null || echo unknown)
  DIRTY  :=
endif

# Homebrew installs curl, sqlite and openblas keg-only: pkg-config finds them
# only through their opt/ prefixes.
ifeq ($(UNAME_S),Darwin)
  CPPFLAGS += -D_DARWIN_C_SOURCE
  BREW := $(shell brew --prefix 2>/dev/null)
  empty :=
  export PKG_CONFIG_PATH := $(subst $(empty) $(empty),:,$(foreach k,curl sqlite openblas,$(BREW)/opt/$(k)/lib/pkgconfig)):$(PKG_CONFIG_PATH)
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

OPT      ?= -O2
WERROR   ?= 0
WARN     := -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror) -Wno-unused-parameter -Wshadow -Wvla
# The project's flags; the caller's CPPFLAGS, CFLAGS, LDFLAGS and LDLIBS
# come after them on every command line.
CAL_CPPFLAGS := -Iinclude -I. -I$(BUILD)/gen -D_GNU_SOURCE $(PKG_CFLAGS) \
                -DCAL_PLATFORM_$(shell echo $(PLATFORM) | tr a-z A-Z)
CAL_CFLAGS    = -std=c11 -g $(OPT) $(WARN) -pthread $(SAN_FLAGS)
CAL_LDLIBS   := $(PKG_LIBS) -ldl -lm -pthread
COMPILE       = $(CC) $(CAL_CPPFLAGS) $(CPPFLAGS) $(CAL_CFLAGS) $(CFLAGS)
LINK          = $(CC) $(CAL_CFLAGS) $(CFLAGS) $(LDFLAGS)
LINKLIBS      = $(CAL_LDLIBS) $(LDLIBS)
# The engine is built for the baseline of its architecture: its vector
# kernels carry their own target attributes and are chosen at run time
# (engine/simd.h), so one binary runs on any x86-64. NATIVE=1 builds it for
# this CPU instead (the compiler may then use this CPU's instructions
# anywhere in the engine; bench/engine compares the two).
NATIVE   ?= 0
ARCH_NATIVE := $(if $(filter Darwin-arm64,$(UNAME_S)-$(shell uname -m)),-mcpu=native,-march=native)
ENGINE_CFLAGS ?= -O3 -fno-math-errno $(if $(filter 1,$(NATIVE)),$(ARCH_NATIVE))

ifeq ($(SAN),address)
  SAN_FLAGS := -fsanitize=address -fno-omit-frame-pointer
  CPPFLAGS  += -DCAL_SANITIZER='"address"'
endif
ifeq ($(SAN),undefined)
  SAN_FLAGS := -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=all -fno-omit-frame-pointer
  CPPFLAGS  += -DCAL_SANITIZER='"undefined"'
endif
ifeq ($(SAN),thread)
  SAN_FLAGS := -fsanitize=thread
  CPPFLAGS  += -DCAL_SANITIZER='"thread"'
endif

PLAT_SRC   := $(foreach p,$(PLATFORMS),lib/platform/$(p).c $(wildcard lib/*/*_$(p).c))
LIB_SRC    := $(sort $(filter-out $(PLAT_SRC),$(wildcard lib/*/*.c)) \
                     $(filter lib/platform/$(PLATFORM).c %_$(PLATFORM).c,$(PLAT_SRC)))
ENGINE_SRC := $(sort $(wildcard engine/*.c))
CLI_SRC    := $(sort $(filter-out src/main.c,$(wildcard src/*.c)) $(wildcard server/*.c))
UNIT_SRC   := $(sort $(wildcard tests/unit/test_*.c))
# The allocation-failure walk wraps malloc with GNU ld's --wrap.
ifeq ($(UNAME_S),Darwin)
  UNIT_SRC := $(filter-out tests/unit/test_malloc_fail.c,$(UNIT_SRC))
endif
HELPER_SRC := $(sort $(wildcard tests/helpers/*.c))
SHLIB_SRC  := $(sort $(wildcard tests/helpers/shlib/*.c))
FUZZ_SRC   := $(sort $(wildcard tests/fuzz/fuzz_*.c))
BENCH_SRC  := $(sort $(wildcard bench/*.c))
E2E        := $(sort $(wildcard tests/e2e/test_*.sh))

OBJ        := $(BUILD)/obj
# Quiet by default; `make V=1` prints every command.
ifeq ($(V),1)
  Q :=
  say = @true
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(2)
endif
LIB_OBJ    := $(LIB_SRC:%.c=$(OBJ)/%.o)
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(OBJ)/%.o)
CLI_OBJ    := $(CLI_SRC:%.c=$(OBJ)/%.o)
LIBCAL     := $(BUILD)/libcaliper.a
LIBENG     := $(BUILD)/libcaliper-engine.a
LIBCLI     := $(BUILD)/libcaliper-cli.a
# What a program of the tree links, in link order.
ALL_LIBS   := $(LIBCLI) $(LIBENG) $(LIBCAL)
BIN        := $(BUILD)/caliper
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HELPER_BIN := $(HELPER_SRC:tests/helpers/%.c=$(BUILD)/tests/helpers/%)
SHLIB_BIN  := $(SHLIB_SRC:tests/helpers/shlib/%.c=$(BUILD)/tests/helpers/lib%.so)
REPLAY_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/replay_%)
BENCH_BIN  := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all run test unit e2e fuzz-replay asan ubsan tsan fuzz fuzz-long bench deps install clean check-deps compat
all: $(BIN) $(LIBCAL) $(LIBENG) $(BUILD)/link-flags

# The build identity every stored run records; rewritten only when it changes,
# so a new commit rebuilds exactly the one file that prints it.
BUILD_ID := caliper $(VERSION) (commit $(COMMIT)$(DIRTY), $(PLATFORM), $(strip $(OPT) $(SAN_FLAGS) $(if $(filter 1,$(NATIVE)),$(ARCH_NATIVE))))
$(BUILD)/gen/build_id.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define CAL_VERSION "%s"\n#define CAL_BUILD_ID "%s"\n' '$(VERSION)' '$(BUILD_ID)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
$(OBJ)/src/cli_util.o: $(BUILD)/gen/build_id.h
# The prompt sets are built into the binary (.incbin).
$(OBJ)/lib/workload/workload.o: $(wildcard data/*.txt)
.PHONY: FORCE
# Keep test and bench objects: they are intermediate files to make otherwise.
.SECONDARY:
FORCE:

# Every object depends on the flags it was compiled with: a changed CFLAGS,
# NATIVE or WERROR rebuilds what it changes.
$(BUILD)/gen/flags: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(CC) $(CAL_CPPFLAGS) $(CPPFLAGS) $(CAL_CFLAGS) $(CFLAGS) | $(ENGINE_CFLAGS)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@

$(OBJ)/engine/%.o: engine/%.c $(BUILD)/gen/flags
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(COMPILE) $(ENGINE_CFLAGS) -MMD -MP -c $< -o $@

$(OBJ)/%.o: %.c $(BUILD)/gen/flags
	@mkdir -p $(dir $@)
	$(call say,CC,$<)
	$(Q)$(COMPILE) -MMD -MP -c $< -o $@

# Each archive also depends on its list of members, so one that loses or
# gains a source file is rebuilt even when every object is older than it.
$(BUILD)/gen/%.members: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' $(MEMBERS_$*) >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
MEMBERS_libcaliper        = $(LIB_OBJ)
MEMBERS_libcaliper-engine = $(ENGINE_OBJ)
MEMBERS_libcaliper-cli    = $(CLI_OBJ)

$(LIBCAL): $(LIB_OBJ) $(BUILD)/gen/libcaliper.members
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $(LIB_OBJ)

$(LIBENG): $(ENGINE_OBJ) $(BUILD)/gen/libcaliper-engine.members
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $(ENGINE_OBJ)

# The flags a program linking these archives needs beyond the libraries (a
# sanitizer's runtime); scripts/install.sh writes them into the .pc files.
$(BUILD)/link-flags: FORCE
	@mkdir -p $(dir $@)
	@printf '%s\n' '$(strip $(SAN_FLAGS))' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@

$(LIBCLI): $(CLI_OBJ) $(BUILD)/gen/libcaliper-cli.members
	@mkdir -p $(dir $@)
	$(call say,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $(CLI_OBJ)

$(BIN): $(OBJ)/src/main.o $(ALL_LIBS)
	$(call say,LD,$@)
	$(Q)$(LINK) -o $@ $^ $(LINKLIBS)

$(BUILD)/tests/%: $(OBJ)/tests/unit/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(LINK) -o $@ $^ $(LINKLIBS) -lcmocka

# The allocation-failure walk counts caliper's own allocations by wrapping
# them at link time in this one binary (lib/util/alloc.h).
$(BUILD)/tests/test_malloc_fail: CAL_LDLIBS += -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup

$(BUILD)/tests/helpers/lib%.so: tests/helpers/shlib/%.c
	@mkdir -p $(dir $@)
	$(COMPILE) $(LDFLAGS) -fPIC -shared -o $@ $<

$(BUILD)/tests/helpers/%: $(OBJ)/tests/helpers/%.o $(LIBCAL)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(LINK) -o $@ $^ $(LINKLIBS)

# Fuzz targets also build as plain programs that replay their corpus, so
# `make test` exercises every parser's corpus with gcc and no libFuzzer.
$(BUILD)/tests/replay_%: $(OBJ)/tests/fuzz/%.o $(OBJ)/tests/fuzz/replay_main.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(LINK) -o $@ $^ $(LINKLIBS)

$(BUILD)/bench/%: $(OBJ)/bench/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(LINK) -o $@ $^ $(LINKLIBS)

unit: $(UNIT_BIN)
	@fail=0; for t in $(UNIT_BIN); do echo "== $$t"; $$t || fail=1; done; exit $$fail

fuzz-replay: $(REPLAY_BIN)
	@fail=0; for t in $(REPLAY_BIN); do n=$${t##*/replay_}; \
	  $$t tests/fuzz/corpus/$$n || fail=1; done; exit $$fail

e2e: $(BIN) $(HELPER_BIN) $(SHLIB_BIN)
	@fail=0; for t in $(E2E); do echo "== $$t"; \
	  CALIPER=$(abspath $(BIN)) BUILD=$(abspath $(BUILD)) bash $$t || { echo "FAILED: $$t"; fail=1; }; \
	done; exit $$fail

# The closing line counts both kinds: cmocka binaries print their own summaries.
test: check-deps
	@$(MAKE) --no-print-directory all $(UNIT_BIN) $(REPLAY_BIN) $(HELPER_BIN) $(SHLIB_BIN)
	@bash tests/run_all.sh "$(BUILD)" "$(UNIT_BIN)" "$(REPLAY_BIN)" "$(E2E)"

# A sanitizer slows the code under test 2-15x: each e2e script gets 30 minutes
# before it counts as hung, not the plain build's 5 (tests/run_all.sh). CI
# runs the whole suite, end-to-end scripts included, under asan and ubsan
# (about 6 minutes each on 2 cores).
asan:
	@CALIPER_E2E_TIMEOUT=1800 $(MAKE) --no-print-directory BUILD=build/asan SAN=address test
ubsan:
	@CALIPER_E2E_TIMEOUT=1800 $(MAKE) --no-print-directory BUILD=build/ubsan SAN=undefined test
tsan:
	@CALIPER_E2E_TIMEOUT=1800 $(MAKE) --no-print-directory BUILD=build/tsan SAN=thread test

FUZZ_SECONDS ?= 20
# Every target runs under the same bounds: one input taking over
# FUZZ_TIMEOUT seconds, or the process over FUZZ_RSS_MB of memory (a single
# allocation over it too), is a failure with its input kept, so a quadratic
# path or a huge reservation fails the run instead of passing slowly.
FUZZ_TIMEOUT ?= 10
FUZZ_RSS_MB  ?= 2048
# Each target for 10 minutes (CI runs each for a few seconds).
fuzz-long:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=600
fuzz:
	@$(MAKE) --no-print-directory BUILD=build/fuzz CC=clang \
	  SAN_FLAGS='-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined' \
	  ENGINE_CFLAGS='-O1' $(addprefix build/fuzz/obj/tests/fuzz/,$(notdir $(FUZZ_SRC:.c=.o))) \
	  build/fuzz/libcaliper.a build/fuzz/libcaliper-engine.a build/fuzz/libcaliper-cli.a
	@set -e; for f in $(FUZZ_SRC); do n=$$(basename $$f .c); \
	  clang -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -o build/fuzz/$$n build/fuzz/obj/tests/fuzz/$$n.o \
	    build/fuzz/libcaliper-cli.a build/fuzz/libcaliper-engine.a build/fuzz/libcaliper.a $(LINKLIBS); \
	  mkdir -p build/fuzz/corpus/$$n; \
	  echo "== fuzz $$n for $(FUZZ_SECONDS)s"; \
	  build/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -timeout=$(FUZZ_TIMEOUT) -rss_limit_mb=$(FUZZ_RSS_MB) -malloc_limit_mb=$(FUZZ_RSS_MB) \
	    -artifact_prefix=build/fuzz/$$n- \
	    build/fuzz/corpus/$$n tests/fuzz/corpus/$$n; done

bench: $(BENCH_BIN) $(BIN)

# MPI (`caliper run --mpi`): build/caliper-mpi is the same program plus
# mpi/run_mpi.c, compiled and linked with mpicc. libcaliper.a and
# build/caliper never link MPI; `caliper run --mpi` execs caliper-mpi from
# beside itself (src/mpi_ops.h). WITH_MPI=auto builds it where mpicc is
# found, yes fails without mpicc, no never builds it (a package that must
# not depend on what the build machine happens to have).
WITH_MPI ?= auto
ifeq ($(filter $(WITH_MPI),auto yes no),)
  $(error WITH_MPI: "$(WITH_MPI)" is not one of auto yes no)
endif
ifneq ($(WITH_MPI),no)
  MPICC ?= $(shell command -v mpicc 2>/dev/null)
  ifeq ($(MPICC)$(WITH_MPI),yes)
    $(error WITH_MPI=yes but no mpicc was found (Debian: libopenmpi-dev))
  endif
else
  MPICC :=
endif
ifneq ($(MPICC),)
MPI_BIN := $(BUILD)/caliper-mpi
all: $(MPI_BIN)
$(OBJ)/mpi/%.o: mpi/%.c $(BUILD)/gen/flags
	@mkdir -p $(dir $@)
	$(call say,MPICC,$<)
	$(Q)$(MPICC) $(CAL_CPPFLAGS) $(CPPFLAGS) $(CAL_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@
$(MPI_BIN): $(OBJ)/src/main.o $(OBJ)/mpi/run_mpi.o $(ALL_LIBS)
	$(call say,LD,$@)
	$(Q)$(MPICC) $(CAL_CFLAGS) $(CFLAGS) $(LDFLAGS) -o $@ $^ $(LINKLIBS)
endif

COMPAT_BIN := $(BUILD)/compat/next_token $(BUILD)/compat/tokenize_vectors
$(BUILD)/compat/%: $(OBJ)/tests/compat/%.o $(ALL_LIBS)
	@mkdir -p $(dir $@)
	$(call say,LD,$@)
	$(Q)$(LINK) -o $@ $^ $(LINKLIBS)
compat: all $(COMPAT_BIN)
	@bash tests/compat/run.sh "$(abspath $(BUILD))"

# `make test` installs what it misses, as `make run` does: on Debian the
# packages of deps-build and deps-test that are not installed (nothing to do
# and no root needed when all are); elsewhere the libraries are checked.
check-deps:
	$(call apt_install,$(DEPS_BUILD) $(DEPS_TEST),make test,deps-build deps-test,quiet)
	@pkg-config --exists $(PKGS) cmocka || { \
	  echo "missing libraries: run 'make deps' (as root) first" >&2; exit 2; }

# deps-build: what `make` and `make run` need. deps-test: what `make test`
# adds (it installs both lists itself): cmocka; locales (the tests build a
# de_DE locale with localedef, decimal comma); jq, python3, sqlite3, curl
# (the end-to-end scripts read what caliper wrote); chromium (the HTML
# report is opened in a real browser); Open MPI (caliper-mpi and its
# tests); man-db; xmllint (libxml2-utils) and cmark-gfm (caliper
# gate's JUnit checked against its XSD, its Markdown rendered as GitHub
# renders it). Under CI=true a missing test tool fails its check
# (tests/e2e/lib.sh: need). deps-ci: what CI's other checks add: clang and
# its runtime (make fuzz); qemu-user (make test-portable runs the binary as
# older CPUs); debhelper, lintian, devscripts (the Debian package,
# scripts/check-deb.sh); ruby (ruby -c on the Homebrew formula);
# debootstrap (scripts/check-fresh.sh). deps-compat: cmake, g++, git; make
# compat builds llama.cpp from node-llama-cpp's bundle, fetched with the npm
# that comes with Node.js (Debian's npm package conflicts with NodeSource's
# nodejs, which carries its own, so npm is checked for, not installed).
DEPS_BUILD  := build-essential pkg-config libcurl4-openssl-dev libjansson-dev libyajl-dev \
               libsqlite3-dev libopenblas-dev libmicrohttpd-dev libssl-dev libpcre2-dev
DEPS_TEST   := libcmocka-dev sqlite3 curl python3 jq chromium locales \
               openmpi-bin libopenmpi-dev man-db libxml2-utils cmark-gfm
DEPS_CI     := clang libclang-rt-dev qemu-user debhelper lintian devscripts fakeroot ruby \
               debootstrap
DEPS_COMPAT := cmake g++ git
# apt_install LIST,NAME,TARGETS[,quiet]: apt-get only for what is missing
# (dpkg-query), so a second call is quick and needs no root. Not root: sudo
# where there is one; without it, or when it fails, the missing packages
# and the command to run as root, exit 2. quiet: nothing printed outside
# Debian (the caller checks what it needs).
define apt_install
	@if command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1; then \
	  missing=; for p in $(1); do \
	    [ "$$(dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null)" = installed ] || missing="$$missing $$p"; \
	  done; \
	  if [ -z "$$missing" ]; then echo "$(2): packages all present"; else \
	    hint="$(2): missing$$missing; as root run 'make $(3)' (or apt-get install$$missing), then this again"; \
	    if [ "$$(id -u)" = 0 ]; then SUDO=; \
	    elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; echo "$(2): installing$$missing with sudo"; \
	    else echo "$$hint" >&2; exit 2; fi; \
	    { $$SUDO apt-get update -qq && \
	      $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; } || \
	      { echo "$$hint" >&2; exit 2; }; \
	  fi; \
	elif [ "$(4)" != quiet ]; then \
	  echo "Not a Debian system. Install the equivalents of:"; \
	  echo "  Debian:   apt-get install $(1)"; \
	  echo "  macOS:    brew install curl jansson yajl sqlite openblas libmicrohttpd openssl@3 pcre2 pkg-config (tests: cmocka llvm open-mpi)"; \
	  echo "  Fedora:   dnf install gcc make pkgconf libcurl-devel jansson-devel yajl-devel sqlite-devel openblas-devel libmicrohttpd-devel openssl-devel pcre2-devel (tests: libcmocka-devel clang compiler-rt glibc-locale-source openmpi-devel qemu-user)"; \
	fi
endef
.PHONY: deps-build deps-test deps-ci deps-compat check-isa test-portable dist
# One apt step for all of them: two at once under make -j would fight over
# dpkg's lock.
deps:
	$(call apt_install,$(DEPS_BUILD) $(DEPS_TEST) $(DEPS_CI) $(DEPS_COMPAT),deps,deps)
	@command -v npm >/dev/null 2>&1 || echo "deps: npm not found: make compat needs Node.js's npm (NodeSource or nodejs.org) the first time"
deps-build:
	$(call apt_install,$(DEPS_BUILD),deps-build,deps-build)
deps-test:
	$(call apt_install,$(DEPS_BUILD) $(DEPS_TEST),deps-test,deps-test)
deps-ci:
	$(call apt_install,$(DEPS_CI),deps-ci,deps-ci)
deps-compat:
	$(call apt_install,$(DEPS_COMPAT),deps-compat,deps-compat)
	@command -v npm >/dev/null 2>&1 || echo "deps-compat: npm not found: make compat needs Node.js's npm (NodeSource or nodejs.org) the first time"

run: deps-build
	@$(MAKE) --no-print-directory all
	@bash scripts/make-run.sh $(BIN)

# Man pages from each command's --help (scripts/gen-man.sh), made when the
# binary is: an install copies them and runs nothing it installs.
MAN_STAMP := $(BUILD)/man/.stamp
all: $(MAN_STAMP)
$(MAN_STAMP): $(BIN) scripts/gen-man.sh
	$(call say,MAN,$(BUILD)/man)
	$(Q)rm -rf $(BUILD)/man && bash scripts/gen-man.sh $(BIN) $(BUILD)/man && touch $@

install: all
	@DESTDIR='$(DESTDIR)' PREFIX='$(PREFIX)' BINDIR='$(BINDIR)' LIBDIR='$(LIBDIR)' \
	  INCLUDEDIR='$(INCLUDEDIR)' MANDIR='$(MANDIR)' PKGCONFIGDIR='$(PKGCONFIGDIR)' \
	  VERSION='$(VERSION)' bash scripts/install.sh $(BUILD)

# Outside the section cal_simd (engine/simd.h), build/caliper holds no
# instruction beyond baseline x86-64: what a portable binary promises.
check-isa: $(BIN)
	@bash scripts/check-isa.sh $(BIN)

# The engine's tests and a short serve + run, under qemu-x86_64 as CPUs
# without AVX-512 (Nehalem: SSE4.2, the portable kernels; Haswell: AVX2 and
# FMA), each printing the kernels it chose (scripts/test-portable.sh).
test-portable: all $(BUILD)/tests/test_kernels $(BUILD)/tests/test_kquants $(BUILD)/tests/test_q32 \
               $(BUILD)/tests/test_engine
	@bash scripts/test-portable.sh $(BUILD)

# The source tarball: the committed tree (git archive) plus VERSION's value
# and COMMIT, so a build outside git names its version and commit.
DIST := caliper-$(VERSION)
dist:
	@[ "$(IN_GIT)" = 1 ] || { echo "dist: needs the git work tree" >&2; exit 2; }
	@rm -rf build/dist && mkdir -p build/dist
	@git archive --format=tar --prefix=$(DIST)/ HEAD | tar -x -C build/dist
	@printf '%s\n' '$(COMMIT)$(DIRTY)' >build/dist/$(DIST)/COMMIT
	@tar -C build/dist -czf $(DIST).tar.gz --owner=0 --group=0 --sort=name $(DIST)
	@echo "wrote $(DIST).tar.gz (commit $(COMMIT)$(DIRTY))"

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

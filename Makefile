# cpython-perf: Linux perf support for CPython 3.11, as a patch series and
# overlay files applied to the pinned python.org tarball.
#
# `make help` lists the targets.  Every variable below can be overridden on
# the command line or in the environment (`make JOBS=4`).

PYTHON_VERSION  ?= 3.11.2
PYTHON_SHA256   ?= 2411c74bda5bbcfcddaf4531f66d1adc73f247f529aee981b029513aefdbf849
PYTHON_TGZ_NAME := Python-$(PYTHON_VERSION).tgz
# Where the tarball is looked for, in this order; then it is downloaded.
SHARED_CPYTHON  ?= $(CURDIR)/../shared/cpython
PYTHON_TARBALL  ?=
DOWNLOAD_CACHE  ?= $(HOME)/.cache/cpython-perf
PYTHON_URL      ?= https://www.python.org/ftp/python/$(PYTHON_VERSION)/$(PYTHON_TGZ_NAME)

JOBS            ?= $(shell nproc 2>/dev/null || echo 2)
# Our configure builds with frame pointers by default (so that `perf record
# -g` walks through the interpreter); stock 3.11.2's does not know how, so
# its builds (`make bench`, `make check-abi`) get the same flags given here.
FP_CFLAGS       ?= -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
# The distribution-style build (`make nofp`, for -X perf_jit): configured
# --without-frame-pointers, with the hardening flags distributions use (CET
# included, so that the endbr64 form of the trampoline is built and tested).
NOFP_CFLAGS     ?= -fstack-protector-strong -fcf-protection
CONFIGURE_FLAGS ?= --without-ensurepip

# The patched tree and its build (BUILD and PATCHES are overridden by
# `make check-series` only).
BUILD   ?= build
PATCHES ?= patches
SRC     := $(BUILD)/src
STAMPS  := $(BUILD)/.stamps
# build/src is a git work tree whose repository lives beside it, not in
# it: CPython's build would otherwise stamp sys.version with our git tags.
SRCGIT  := git --git-dir=$(BUILD)/src.git --work-tree=$(SRC)
NOFP    := build-nofp
# What `make series` and `make dist` write, and where their checks build.
DIST      ?= dist
DIST_NAME ?= Python-$(PYTHON_VERSION)-perf
DIST_TGZ  := $(DIST)/$(DIST_NAME).tar.gz
CHECK_DIST   ?= build-check-dist
CHECK_EXPORT ?= build-check-export
STOCK   := build-stock
ASAN    := build-asan
PGO     := build-pgo
CLANG   := build-clang
DEB     := build-deb

# Misc/NEWS.d has directories with spaces in their names ("Core and
# Builtins"): the names are sorted first, then their spaces escaped, which
# both make (prerequisites) and the shell (the copy loop below) understand.
# Byte-code caches that a Python run in the checkout leaves are not ours,
# and Doc/cpython-perf/ is the project's own documentation (the packagers'
# and developers' guides), not a page of CPython's.
OVERLAY := $(shell find Python Include Lib Doc Misc -type f \
               ! -path '*/__pycache__/*' ! -name '*.py[co]' \
               ! -path 'Doc/cpython-perf/*' 2>/dev/null | \
             LC_ALL=C sort | sed 's/ /\\ /g')
SERIES  := $(addprefix $(PATCHES)/,$(shell grep -v '^\#' $(PATCHES)/series))

# Prints the path of a verified copy of the tarball, or explains and fails.
FIND_TARBALL = tools/find-tarball.sh $(PYTHON_TGZ_NAME) $(PYTHON_SHA256) \
    '$(PYTHON_URL)' '$(DOWNLOAD_CACHE)' $(dir $(PYTHON_TARBALL)) \
    '$(SHARED_CPYTHON)'

# Run CPython's own tests without the caller's PYTHON* variables.
CLEAN_ENV = env $(foreach v,$(filter PYTHON%,$(.VARIABLES)),-u $(v))

.PHONY: all help demo test nofp stock bench tree refresh-patch \
        check-series regrtest-perf check-abi sanitize check-viewer docs series dist \
        check-cross check-install \
        check-dist check-export check-pgo check-clang deb clean distclean

all: $(BUILD)/python

help:
	@echo "make            build the patched interpreter, runs in place as build/python"
	@echo "make demo       build, then profile examples/demo.py with perf and print the report"
	@echo "make test       build both interpreters and run the test suite on each"
	@echo "make nofp       build the no-frame-pointer interpreter build-nofp/python"
	@echo "make bench      build stock 3.11.2 too and print the overhead table"
	@echo "make stock      build only stock 3.11.2 (unpatched, same flags) in build-stock/"
	@echo "make tree       re-create build/src from the tarball (drops edits made there)"
	@echo "make refresh-patch PATCH=patches/NNNN-x.patch"
	@echo "                regenerate a patch from your edits in build/src"
	@echo "make check-series  check that every prefix of the series builds"
	@echo "make regrtest-perf CPython's whole suite off, with PYTHONPERFSUPPORT=1"
	@echo "                and with PYTHON_PERF_JIT_SUPPORT=1: same results (1-2 h)"
	@echo "make check-abi  the ABI of stock 3.11.2 is kept (shared builds in build-abi/)"
	@echo "make sanitize   ASan+UBSan build in build-asan/, then our tests and storms"
	@echo "make check-cross ARCH=aarch64|riscv64|i686"
	@echo "                cross-build in build-cross-ARCH/, check under qemu-user (~2 min)"
	@echo "make check-install  make install build/ into a prefix and a DESTDIR, a venv,"
	@echo "                -X perf under perf, the perf tests from the installed"
	@echo "                stdlib ($(INSTALL_DIR)/, or INSTALL_DIR=anywhere; ~3 min)"
	@echo "make check-pgo  GCC PGO+LTO build (--enable-optimizations --with-lto, trained"
	@echo "                without -X perf) in $(PGO)/: per-call figures, perf, tests (15 min idle, 35 loaded)"
	@echo "make check-clang  clang 14 builds, -O3 in $(CLANG)/ and --with-lto (full LTO) in"
	@echo "                $(CLANG)-lto/, ThinLTO in $(CLANG)-thinlto/, stock 3.11.2 beside each:"
	@echo "                CET, frame records, per-call figures, perf, tests (CLANG_MODES)"
	@echo "make deb        Debian's python3.11 source package with our series, built by"
	@echo "                dpkg-buildpackage in $(DEB)/ and checked from its unpacked .debs"
	@echo "                (DEB_STEP=prepare|build|check; about an hour on two cores)"
	@echo "make check-viewer  profile viewers (speedscope, flame graph, hotspot, Firefox Profiler) show py:: names"
	@echo "make docs       the HTML documentation in build/docs/html (needs no build)"
	@echo "make series     export the series packagers apply, new files included, to $(DIST)/patches/"
	@echo "make dist       the patched source tarball, configure regenerated: $(DIST_TGZ)"
	@echo "make check-dist unpack $(DIST_TGZ), ./configure && make, test it ($(CHECK_DIST)/)"
	@echo "make check-export  apply $(DIST)/patches with quilt and git am, compare, build ($(CHECK_EXPORT)/)"
	@echo "make clean      remove the object files, keep the unpacked tree"
	@echo "make distclean  remove everything the build made"

# --- the source tree ------------------------------------------------------

$(STAMPS)/unpacked: tools/find-tarball.sh
	@tgz=$$($(FIND_TARBALL)) || exit 1; \
	  echo "unpacking $$tgz (sha256 verified)"; \
	  rm -rf $(SRC) $(BUILD)/src.git $(STAMPS) && mkdir -p $(SRC) $(STAMPS) && \
	  tar -xzf "$$tgz" -C $(SRC) --strip-components=1 && \
	  $(SRCGIT) init -q && \
	  $(SRCGIT) add -A && \
	  $(SRCGIT) -c user.name=cpython-perf -c user.email=build@localhost \
	      commit -q -m "CPython $(PYTHON_VERSION) from $(PYTHON_TGZ_NAME)" && \
	  $(SRCGIT) tag upstream
	@touch $@

$(STAMPS)/patched: $(STAMPS)/unpacked $(PATCHES)/series $(SERIES) \
                   configure.ac.fragment tools/prepare-tree.sh
	tools/prepare-tree.sh $(SRC) $(PATCHES) configure.ac.fragment
	@touch $@

# Files that once were overlay files and are not any more (moved, removed):
# a tree prepared before still has them, and would run and install them.
GONE := Lib/test/test_perf_profiler.py

# Overlay files are copied only when they differ, so make in the objdir sees
# new mtimes for exactly the files that were edited.
$(STAMPS)/overlay: $(STAMPS)/patched $(OVERLAY)
	@for f in $(GONE); do \
	    [ ! -e "$(SRC)/$$f" ] || { rm -f "$(SRC)/$$f" && echo "removed $$f"; }; \
	done
	@for f in $(OVERLAY); do \
	    cmp -s "$$f" "$(SRC)/$$f" || { mkdir -p "$(SRC)/$$(dirname "$$f")" && \
	                              cp "$$f" "$(SRC)/$$f" && echo "overlay $$f"; }; \
	done
	@touch $@

tree:
	rm -rf $(SRC) $(BUILD)/src.git $(STAMPS)
	$(MAKE) $(STAMPS)/overlay

# --- the two interpreters -------------------------------------------------

# configure runs in the object directory; the source tree stays clean so
# that both builds can share it.
# CPython's own Makefile re-runs configure when build/src/configure changes,
# so configure runs here only for a new object directory.
$(BUILD)/Makefile: | $(STAMPS)/overlay
	cd $(BUILD) && ./src/configure $(CONFIGURE_FLAGS) \
	    > configure.log 2>&1 || { tail -30 configure.log; exit 1; }

$(NOFP)/Makefile: | $(STAMPS)/overlay
	mkdir -p $(NOFP)
	cd $(NOFP) && ../$(SRC)/configure $(CONFIGURE_FLAGS) --without-frame-pointers \
	    CFLAGS="$(NOFP_CFLAGS)" \
	    > configure.log 2>&1 || { tail -30 configure.log; exit 1; }

$(BUILD)/python: $(BUILD)/Makefile $(STAMPS)/overlay FORCE
	$(MAKE) -C $(BUILD) -j$(JOBS) -s

$(NOFP)/python: $(NOFP)/Makefile $(STAMPS)/overlay FORCE
	$(MAKE) -C $(NOFP) -j$(JOBS) -s

nofp: $(NOFP)/python

# Stock CPython from the same tarball with the same flags, unpatched: the
# baseline of `make bench`.
$(STOCK)/src/configure: tools/find-tarball.sh
	@tgz=$$($(FIND_TARBALL)) || exit 1; \
	  rm -rf $(STOCK) && mkdir -p $(STOCK)/src && \
	  tar -xzf "$$tgz" -C $(STOCK)/src --strip-components=1
	@touch $@

$(STOCK)/Makefile: $(STOCK)/src/configure
	cd $(STOCK) && ./src/configure $(CONFIGURE_FLAGS) CFLAGS="$(FP_CFLAGS)" \
	    > configure.log 2>&1 || { tail -30 configure.log; exit 1; }

$(STOCK)/python: $(STOCK)/Makefile
	$(MAKE) -C $(STOCK) -j$(JOBS) -s

stock: $(STOCK)/python

# The same patched tree with AddressSanitizer and UndefinedBehaviorSanitizer
# (`make sanitize`).  The interpreter runs while it is being built, and
# CPython does not free everything at exit by design: leak reports would
# stop the build, so leak detection is off here as in tools/sanitize.sh.
$(ASAN)/Makefile: | $(STAMPS)/overlay
	mkdir -p $(ASAN)
	cd $(ASAN) && ../$(SRC)/configure $(CONFIGURE_FLAGS) \
	    --with-address-sanitizer --with-undefined-behavior-sanitizer \
	    > configure.log 2>&1 || \
	    { tail -30 configure.log; exit 1; }

$(ASAN)/python: $(ASAN)/Makefile $(STAMPS)/overlay FORCE
	ASAN_OPTIONS=detect_leaks=0 $(MAKE) -C $(ASAN) -j$(JOBS) -s

sanitize: $(ASAN)/python
	$(CLEAN_ENV) tools/sanitize.sh $(ASAN)/python

FORCE:

# --- using it ---------------------------------------------------------------

demo: $(BUILD)/python
	tools/demo.sh $(BUILD)/python examples/demo.py

test: $(BUILD)/python $(NOFP)/python
	$(CLEAN_ENV) tools/run-tests.sh $(BUILD)/python $(NOFP)/python

bench: $(BUILD)/python $(STOCK)/python
	$(CLEAN_ENV) $(BUILD)/python bench/run.py --stock $(STOCK)/python \
	    --ours $(BUILD)/python

# CPython's whole test suite in the three modes, compared test by test with
# the list of known differences in Doc/cpython-perf/developing.md.
# test_socket hangs on our machines in every mode (with or without the
# patches), so it is left out.
REGRTEST_EXCLUDE ?= test_socket
regrtest-perf: $(BUILD)/python
	$(CLEAN_ENV) $(BUILD)/python tools/suite-modes.py --python $(BUILD)/python \
	    --out $(BUILD)/regrtest-perf --jobs 2 \
	    --known Doc/cpython-perf/developing.md \
	    $(addprefix --exclude ,$(REGRTEST_EXCLUDE))
# build/ installed as users install it, with CPython's own `make install`
# (into a prefix, and staged under a DESTDIR), a venv made from the
# prefix, and the checks of tools/check-install.sh in each.  INSTALL_DIR
# can be anywhere (under /tmp, say).
INSTALL_DIR ?= build-install
check-install: $(BUILD)/python
	$(CLEAN_ENV) tools/check-install.sh $(BUILD) $(INSTALL_DIR) examples/demo.py

# The patched tree built as distributions build it with GCC: PGO trained
# by CPython's own profile task (which never runs -X perf) and by
# Lib/test/perf_pgo_task.py under -X perf (patch 0013), then LTO.
# tools/check-pgo.sh prints the per-call figures and runs perf and the
# perf tests with it.
check-pgo: $(BUILD)/python
	$(CLEAN_ENV) tools/check-pgo.sh $(SRC) $(PGO) $(JOBS)

# The patched tree built with clang (plain -O3, --with-lto, which is full
# LTO with clang in 3.11, and --with-lto=thin: CLANG_MODES picks), each
# beside a stock 3.11.2 built the same way (from the pristine tree of
# `make stock`): tools/check-clang.sh says what it checks.
CLANG_MODES ?= O3 lto thinlto
check-clang: $(BUILD)/python $(STOCK)/src/configure
	@for m in $(CLANG_MODES); do \
	    dir=$(CLANG)$$( [ $$m = O3 ] || echo -$$m ); \
	    $(CLEAN_ENV) STOCK_SRC=$(STOCK)/src FP_CFLAGS="$(FP_CFLAGS)" \
	        tools/check-clang.sh $(SRC) $$dir $(JOBS) $$m || exit 1; \
	done

# Debian's own python3.11 package (apt-get source) with our exported
# series added to its quilt series, built with dpkg-buildpackage and
# checked from the unpacked .debs (tools/deb.sh).  DEB_STEP runs one step.
DEB_STEP ?=
deb: $(DIST)/patches/series
	tools/install-deps.sh deb
	$(CLEAN_ENV) tools/deb.sh $(DIST)/patches $(DEB) $(JOBS) $(DEB_STEP)

# A profile of examples/demo.py opened in speedscope and a flame graph in
# headless Chromium, in hotspot's parser and in the Firefox Profiler's
# importer (its command line); `perf_trampoline record --python
# --flamegraph` checked the same way (tools/viewer/viewer.test.mjs);
# screenshots in build/viewer-shots/.
check-viewer: $(BUILD)/python
	tools/viewer/install.sh $(BUILD)/viewer
	$(CLEAN_ENV) CHECK_PYTHON=$(BUILD)/python VIEWER_DIR=$(BUILD)/viewer \
	    SHOTS=$(BUILD)/viewer-shots PICTURE=$(PICTURE) node --test tools/viewer/viewer.test.mjs
# The patched tree cross-built for ARCH (aarch64, riscv64, i686) with
# Debian's cross compiler, our build/python as the build python, and
# checked under qemu-user: tools/check-cross.sh says what it checks.
# CROSS_CFLAGS adds compiler flags (-mbranch-protection=standard, say), in
# a build directory of their own.
ARCH         ?= aarch64
CROSS_CFLAGS ?=
CROSS_DIR    ?= build-cross-$(ARCH)$(subst =,-,$(subst +,-,$(subst $(eval) ,,$(CROSS_CFLAGS))))

check-cross: $(BUILD)/python
	tools/install-deps.sh cross-$(ARCH)
	$(CLEAN_ENV) CROSS_CFLAGS="$(CROSS_CFLAGS)" tools/check-cross.sh \
	    $(ARCH) $(BUILD)/python $(SRC) $(CROSS_DIR) $(JOBS)

# The documentation of the patched tree, with Debian's Sphinx; fails on a
# warning (broken references included) from our files.  tools/docs.sh says
# which warnings count.
DOCS := $(BUILD)/docs

docs: $(STAMPS)/overlay
	$(CLEAN_ENV) tools/docs.sh $(SRC) $(DOCS)

refresh-patch:
	@test -n "$(PATCH)" || { echo "usage: make refresh-patch PATCH=patches/NNNN-name.patch"; exit 1; }
	tools/refresh-patch.sh $(SRC) $(PATCH)

# Packagers carry parts of the series, or bisect through it: patches 1..k,
# for k = 1, 2, ..., go in turn into one tree in build-series/, which is
# rebuilt (incrementally) after each.
check-series:
	tools/check-series.sh "$(MAKE)" build-series

# Stock and patched --enable-shared builds, same flags, for `make check-abi`
# (tools/check-abi.sh says what it checks).  The stock one reuses the
# tarball unpacked in build-stock/src and is built once.
ABI     := build-abi
ABI_CONFIGURE = $(CONFIGURE_FLAGS) --enable-shared CFLAGS="$(FP_CFLAGS)" \
    > configure.log 2>&1 || { tail -30 configure.log; exit 1; }

$(ABI)/stock/Makefile: $(STOCK)/src/configure
	rm -rf $(ABI)/stock && mkdir -p $(ABI)/stock
	cd $(ABI)/stock && ../../$(STOCK)/src/configure $(ABI_CONFIGURE)

$(ABI)/stock/python: $(ABI)/stock/Makefile
	$(MAKE) -C $(ABI)/stock -j$(JOBS) -s

$(ABI)/ours/Makefile: | $(STAMPS)/overlay
	mkdir -p $(ABI)/ours
	cd $(ABI)/ours && ../../$(SRC)/configure $(ABI_CONFIGURE)

$(ABI)/ours/python: $(ABI)/ours/Makefile $(STAMPS)/overlay FORCE
	$(MAKE) -C $(ABI)/ours -j$(JOBS) -s

check-abi: $(BUILD)/python $(ABI)/stock/python $(ABI)/ours/python
	tools/install-deps.sh
	$(CLEAN_ENV) tools/check-abi.sh $(BUILD)/python $(STOCK)/src \
	    $(ABI)/stock $(SRC) $(ABI)/ours $(ABI)/work

# --- shipping: the exported series and the source tarball ------------------

series: $(DIST)/patches/series

$(DIST)/patches/series: $(STAMPS)/overlay tools/export-series.sh \
                        $(wildcard tools/export/*)
	tools/export-series.sh $(SRC) $(PATCHES) $(DIST)/patches $(OVERLAY)

dist: $(DIST_TGZ)

$(DIST_TGZ): $(STAMPS)/overlay tools/make-dist.sh
	tools/make-dist.sh $(SRC) $(DIST_NAME) $@ $(OVERLAY)

check-dist: $(DIST_TGZ)
	$(CLEAN_ENV) tools/check-dist.sh $(DIST_TGZ) $(CHECK_DIST) $(JOBS)

check-export: $(DIST)/patches/series
	@tgz=$$($(FIND_TARBALL)) || exit 1; \
	  $(CLEAN_ENV) tools/check-export.sh "$$tgz" $(DIST)/patches $(SRC) \
	      $(CHECK_EXPORT) $(JOBS)

clean:
	-$(MAKE) -C $(BUILD) clean
	-$(MAKE) -C $(NOFP) clean
	-$(MAKE) -C $(STOCK) clean
	-$(MAKE) -C $(ABI)/stock clean
	-$(MAKE) -C $(ABI)/ours clean
	-$(MAKE) -C $(ASAN) clean

distclean:
	rm -rf $(BUILD) $(NOFP) $(STOCK) $(ABI) $(ASAN) $(PGO) $(CLANG) $(CLANG)-* $(DEB) build-series build-cross-* \
	    $(DIST) $(CHECK_DIST) $(CHECK_EXPORT) build-install

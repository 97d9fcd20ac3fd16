# deskbox build.  Out-of-tree objects under $(BUILD); `make V=1` shows commands;
# `make SANITIZE=address,undefined` (what `make check` does) builds with sanitizers.

BUILD ?= build
CC ?= cc
V ?= 0
SANITIZE ?=
DEVELOPER ?= 1

PKGS := libmicrohttpd libcjson libvncclient libpng libjpeg libwebp zlib libseccomp x11 nettle libcurl libarchive gnutls libavcodec libavformat libswscale libavutil
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell pkg-config --libs $(1) 2>/dev/null)

# OPT is the optimisation knob; CFLAGS given on the command line are added
# last, never replacing the flags the build needs.
OPT ?= -O2 -g
DBX_CFLAGS := $(OPT)
DBX_CFLAGS += -std=gnu11 -D_GNU_SOURCE -I. -fno-strict-aliasing -pthread $(PKG_CFLAGS)
DBX_CFLAGS += -Wall -Wextra -Wshadow -Wformat=2 -Wno-format-truncation -Wno-unused-parameter -Wmissing-prototypes -Wvla
ifeq ($(DEVELOPER),1)
DBX_CFLAGS += -Werror
endif
ifneq ($(SANITIZE),)
DBX_CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all -DDBX_SANITIZE=1
LDFLAGS += -fsanitize=$(SANITIZE)
endif
DEPFLAGS = -MMD -MP
LDFLAGS += -pthread

ifeq ($(V),1)
Q :=
quiet = @true
else
Q := @
quiet = @printf '  %-6s %s\n'
endif

# Modules: each top-level folder is one static archive.
COMMON_SRC := $(wildcard common/*.c)
INPUT_SRC := $(wildcard input/*.c)
CAPTURE_SRC := $(filter-out capture/bridge%.c,$(wildcard capture/*.c))
BRIDGE_SRC := $(wildcard capture/bridge*.c)
# server/ is one archive per subsystem folder, listed so that each comes
# before what it uses: a static link then fails on an arrow pointing up.
SERVER_MODULES := options compat api mcp desktop viewer sandbox secrets network process files runtime cluster http
VNC_SRC := $(wildcard desktop-image/vnc*.c)
XTOOL_SRC := $(wildcard desktop-image/xtool*.c)
INIT_SRC := $(filter-out $(VNC_SRC) $(XTOOL_SRC),$(wildcard desktop-image/*.c))
# The command-line client: a client of the API, it links only common/.
CLI_SRC := $(wildcard cli/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIBCOMMON := $(BUILD)/libcommon.a
LIBINPUT := $(BUILD)/libinput.a
LIBCAPTURE := $(BUILD)/libcapture.a
SERVER_LIBA := $(foreach m,$(SERVER_MODULES),$(BUILD)/libserver-$(m).a)
LIBSERVER := $(SERVER_LIBA)

DESKBOXD := $(BUILD)/deskboxd
BRIDGE := $(BUILD)/deskbox-bridge
INIT := $(BUILD)/deskbox-init
VNC := $(BUILD)/deskbox-vnc
XTOOL := $(BUILD)/deskbox-xtool
CLI := $(BUILD)/deskbox

SERVER_LIBS := $(call PKG_LIBS,libmicrohttpd libcjson libpng libjpeg libwebp zlib x11 nettle libnftables libmnl libarchive gnutls libavformat libavcodec libswscale libavutil libcurl) -lhttp_parser
BRIDGE_LIBS := $(call PKG_LIBS,libvncclient libseccomp)
INIT_LIBS := $(call PKG_LIBS,x11)
VNC_LIBS := $(call PKG_LIBS,libvncserver x11 xext xdamage xfixes xtst)
CLI_LIBS := $(call PKG_LIBS,libcurl libcjson nettle)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))

BINARIES := $(DESKBOXD) $(BRIDGE) $(INIT) $(VNC) $(XTOOL) $(CLI)

# deskbox's desktop parts for stored images (docs/images.md): the same
# programs, linked to load the host's loader and libraries from
# /.deskbox/lib (a copy of exactly those, bind-mounted read-only), so the
# image's own glibc and X libraries never matter and nothing leaks into
# the image's programs (no LD_LIBRARY_PATH).
IMAGE_DIR := $(BUILD)/image
HOST_INTERP := $(shell readelf -l /bin/sh 2>/dev/null | sed -n 's/.*interpreter: \(.*\)]/\1/p')
IMAGE_LDFLAGS := -Wl,--dynamic-linker=/.deskbox/lib/$(notdir $(HOST_INTERP)) \
	-Wl,-rpath,/.deskbox/lib -Wl,--disable-new-dtags
IMAGE_BINS := $(IMAGE_DIR)/deskbox-init $(IMAGE_DIR)/deskbox-vnc $(IMAGE_DIR)/deskbox-xtool
BINARIES += $(IMAGE_BINS) $(IMAGE_DIR)/lib/.done

.PHONY: all bin image run test check check-structure check-headers format clean install-deps \
	install-run-deps unit integration bench compile_commands.json
all: $(BINARIES) $(UNIT_BIN)
# What `make run` needs: the programs and the image parts, no tests.
bin: $(BINARIES)

# run, test, check, bench and image build with one job per core.
NPROC := $(shell nproc 2>/dev/null || echo 1)
SUBMAKE = $(MAKE) --no-print-directory -j$(NPROC)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(quiet) CC $@
	$(Q)$(CC) $(DBX_CFLAGS) $(CFLAGS) $(DEPFLAGS) -c -o $@ $<

$(BUILD)/lib%.a:
	@mkdir -p $(dir $@)
	$(quiet) AR $@
	$(Q)rm -f $@ && ar rcs $@ $^

$(LIBCOMMON): $(call obj,$(COMMON_SRC))
$(LIBINPUT): $(call obj,$(INPUT_SRC))
$(LIBCAPTURE): $(call obj,$(CAPTURE_SRC))
$(foreach m,$(SERVER_MODULES),$(eval $(BUILD)/libserver-$(m).a: $(call obj,$(wildcard server/$(m)/*.c))))
# The compatibility front-ends: one sub-folder per engine.
$(BUILD)/libserver-compat.a: $(call obj,$(wildcard server/compat/*/*.c))
# The Python context driver is embedded with .incbin.
$(call obj,server/process/process_ctx.c): desktop-image/deskbox-pyctx.py
$(call obj,server/desktop/desktop_a11y.c): desktop-image/deskbox-a11y.py
# So are the terminal page's files (xterm.js).
$(call obj,server/viewer/viewer_term_page.c): $(wildcard server/viewer/xterm/*.js server/viewer/xterm/*.css)
# So is the API's description.
$(call obj,server/api/api_openapi.c): docs/openapi.yaml

$(DESKBOXD): $(call obj,server/main.c) $(LIBSERVER) $(LIBCAPTURE) $(LIBINPUT) $(LIBCOMMON)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS)

$(BRIDGE): $(call obj,$(BRIDGE_SRC)) $(LIBCAPTURE) $(LIBINPUT) $(LIBCOMMON)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(BRIDGE_LIBS) $(call PKG_LIBS,libpng libjpeg zlib)

$(INIT): $(call obj,$(INIT_SRC)) $(LIBCOMMON)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(INIT_LIBS)

$(XTOOL): $(call obj,$(XTOOL_SRC)) $(LIBCOMMON)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ -lxdo $(call PKG_LIBS,x11 xtst)

$(VNC): $(call obj,$(VNC_SRC)) $(LIBCOMMON)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(VNC_LIBS)

$(CLI): $(call obj,$(CLI_SRC)) $(LIBCOMMON)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(CLI_LIBS)

$(IMAGE_DIR)/deskbox-init: $(call obj,$(INIT_SRC)) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) $(IMAGE_LDFLAGS) -o $@ $^ $(INIT_LIBS)

$(IMAGE_DIR)/deskbox-xtool: $(call obj,$(XTOOL_SRC)) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) $(IMAGE_LDFLAGS) -o $@ $^ -lxdo $(call PKG_LIBS,x11 xtst)

$(IMAGE_DIR)/deskbox-vnc: $(call obj,$(VNC_SRC)) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) $(IMAGE_LDFLAGS) -o $@ $^ $(VNC_LIBS)

# The host libraries those load (ldd of the normal build: same links).
$(IMAGE_DIR)/lib/.done: $(INIT) $(VNC) $(XTOOL) scripts/image-libs.sh
	$(quiet) LIBS $(dir $@)
	$(Q)sh scripts/image-libs.sh $(dir $@) $(INIT) $(VNC) $(XTOOL)
	@touch $@

# A unit test links only the modules it tests: test_input* the input module,
# test_capture* and test_png* capture and input, test_runtime* the runtime
# and image files, the rest all of the server.
TEST_LINK = $(CC) $(LDFLAGS) -o $@ $^ $(SERVER_LIBS) $(BRIDGE_LIBS)
$(filter $(BUILD)/tests/test_input%,$(UNIT_BIN)): $(BUILD)/tests/%: $(call obj,tests/unit/%.c) \
		$(LIBINPUT) $(LIBCOMMON)
# The live-X tests share tests/lib/xlive.c (Xvfb, children, scratch dir).
XLIVE_BIN := $(BUILD)/tests/test_capture $(BUILD)/tests/test_capture_vnc
$(XLIVE_BIN): $(BUILD)/tests/%: $(call obj,tests/unit/%.c) $(call obj,tests/lib/xlive.c) \
		$(LIBCAPTURE) $(LIBINPUT) $(LIBCOMMON)
$(filter-out $(XLIVE_BIN),$(filter $(BUILD)/tests/test_capture%,$(UNIT_BIN))): \
		$(BUILD)/tests/%: $(call obj,tests/unit/%.c) $(LIBCAPTURE) $(LIBINPUT) $(LIBCOMMON)
# The PNG tests share tests/lib/pngread.c (a libpng decoder).
$(filter $(BUILD)/tests/test_png%,$(UNIT_BIN)): $(BUILD)/tests/%: $(call obj,tests/unit/%.c) \
		$(call obj,tests/lib/pngread.c) $(LIBCAPTURE) $(LIBINPUT) $(LIBCOMMON)
$(filter $(BUILD)/tests/test_runtime%,$(UNIT_BIN)): $(BUILD)/tests/%: $(call obj,tests/unit/%.c) \
		$(BUILD)/libserver-runtime.a $(LIBCOMMON)
$(filter-out $(BUILD)/tests/test_input% $(BUILD)/tests/test_capture% $(BUILD)/tests/test_png% \
		$(BUILD)/tests/test_runtime%,$(UNIT_BIN)): $(BUILD)/tests/%: \
		$(call obj,tests/unit/%.c) $(LIBSERVER) $(LIBCAPTURE) $(LIBINPUT) $(LIBCOMMON)
$(UNIT_BIN):
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(TEST_LINK)

# int80 enters the 32-bit system call table; tests/integration/test_seccomp.py
# runs it in a sandbox.  Static and without libc: nothing 32-bit is needed.
ifeq ($(shell uname -m),x86_64)
all: $(BUILD)/tests/bin/int80
$(BUILD)/tests/bin/int80: tests/bin/int80.c
	@mkdir -p $(dir $@)
	$(quiet) CC $@
	$(Q)$(CC) -O2 -Wall -static -nostdlib -ffreestanding -fno-stack-protector -fno-pie -no-pie \
		-o $@ $<
endif

# Fuzz targets (tests/fuzz/fuzz_*.c).  Normally each links replay.c and
# replays its corpus in `make test`; `make fuzz` builds them with clang's
# libFuzzer and runs each for FUZZ_SECONDS.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
FUZZ_SECONDS ?= 60
ifeq ($(LIBFUZZER),1)
FUZZ_MAIN :=
FUZZ_LDFLAGS := -fsanitize=fuzzer
else
FUZZ_MAIN := $(call obj,tests/fuzz/replay.c)
FUZZ_LDFLAGS :=
endif
all: $(FUZZ_BIN)
$(FUZZ_BIN): $(BUILD)/fuzz/%: $(call obj,tests/fuzz/%.c) $(FUZZ_MAIN) $(LIBSERVER) $(LIBCAPTURE) \
		$(LIBINPUT) $(LIBCOMMON)
	@mkdir -p $(dir $@)
	$(quiet) LINK $@
	$(Q)$(CC) $(LDFLAGS) $(FUZZ_LDFLAGS) -o $@ $^ $(SERVER_LIBS) $(BRIDGE_LIBS)

.PHONY: fuzz
fuzz:
	@command -v clang >/dev/null || { echo "make fuzz needs clang (apt-get install clang)"; exit 1; }
	@$(MAKE) --no-print-directory BUILD=build-fuzz CC=clang LIBFUZZER=1 DEVELOPER=0 \
		SANITIZE=address,undefined CFLAGS="-fsanitize=fuzzer-no-link" \
		$(patsubst $(BUILD)/%,build-fuzz/%,$(FUZZ_BIN))
	@for t in $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRC)); do \
		c=tests/fuzz/corpus/$${t#fuzz_}; mkdir -p build-fuzz/corpus/$$t; \
		echo "fuzzing $$t for $(FUZZ_SECONDS)s"; \
		build-fuzz/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) build-fuzz/corpus/$$t $$c || exit 1; \
	done

# Every header compiles on its own, with the project's flags: a header
# that leans on what its includer happened to include before it fails here.
# One stamp per header, redone when it or a header it includes changes.
HEADERS := $(sort $(shell find common input capture server desktop-image cli -name '*.h'))
HEADER_STAMPS := $(patsubst %.h,$(BUILD)/check-headers/%.ok,$(HEADERS))
check-headers: $(HEADER_STAMPS)
$(BUILD)/check-headers/%.ok: %.h
	@mkdir -p $(dir $@)
	$(quiet) HDR $<
	$(Q)printf '#include "%s"\n' $< | $(CC) $(DBX_CFLAGS) $(CFLAGS) -fsyntax-only \
		-MMD -MP -MF $(@:.ok=.d) -MT $@ -x c - && touch $@

# Everything: what runs, and what only the tests and the bench use.
install-deps:
	@sh scripts/install-deps.sh --test
install-run-deps:
	@sh scripts/install-deps.sh

# Starts deskboxd on 127.0.0.1:8080.  LISTEN=, STATE= and USERNS_BASE= pick
# --listen, --state-dir and --userns-base; ARGS= adds any other deskboxd
# options (`make run ARGS="--warm-pool 2 --log-level debug"`).
LISTEN ?= 127.0.0.1:8080
STATE ?= /var/lib/deskbox
USERNS_BASE ?=
ARGS ?=
RUN_ARGS := --listen $(LISTEN) --state-dir $(STATE)
ifneq ($(USERNS_BASE),)
RUN_ARGS += --userns-base $(USERNS_BASE)
endif
run: install-run-deps
	@echo "run: building deskboxd and the image parts ($(NPROC) jobs)"
	@$(SUBMAKE) bin
	$(BUILD)/deskboxd $(RUN_ARGS) $(ARGS)

# The Debian 12 desktop image (docs/images.md): debootstrap from the host's
# apt mirror through POST /v1/images, minutes; then a sandbox from it is
# checked (python3, chromium, typing into xterm).  Not part of `make test`.
IMAGE_NAME ?= debian12
image: install-run-deps
	@$(SUBMAKE) bin
	python3 scripts/build_image.py --build $(BUILD) --state-dir $(STATE) --name $(IMAGE_NAME)

# File and function sizes, and which folder may include which
# (scripts/check_structure.py); `make test` and `make check` run it first.
check-structure:
	@python3 scripts/check_structure.py

test: install-deps check-structure
	@echo "test: building everything, the tests and fuzz replayers too ($(NPROC) jobs)"
	@$(SUBMAKE) all check-headers
	@BUILD=$(BUILD) sh tests/run.sh

# The tests again under AddressSanitizer and UndefinedBehaviorSanitizer;
# `all` builds the fuzz targets as corpus replayers, so tests/run.sh replays
# every corpus under the sanitizers (a replayer not built fails the run).
check: install-deps check-structure
	@$(SUBMAKE) BUILD=build-san SANITIZE=address,undefined OPT="-O1 -g" all
	@BUILD=build-san ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 sh tests/run.sh

# Speed figures against the naive tools, measured in the same run.
# The VM backend's guest (docs/isolation.md): the initramfs generated from
# Debian's kernel modules and busybox-static, and deskbox's parts shared
# read-only as the guest's /.deskbox.  Part of `all` where a Debian kernel
# is installed (linux-image-amd64, install-deps).
VM_DIR := $(BUILD)/vm
VM_PARTS := $(VM_DIR)/initramfs.cpio.gz $(VM_DIR)/deskbox/.done $(VM_DIR)/deskbox-image/.done
.PHONY: vm
vm: $(VM_PARTS)
ifneq ($(wildcard /boot/vmlinuz-*),)
all: $(VM_PARTS)
endif
$(VM_DIR)/initramfs.cpio.gz: scripts/vm-initramfs.sh
	$(quiet) GEN $@
	$(Q)mkdir -p $(VM_DIR) && sh scripts/vm-initramfs.sh $@ $(notdir $(lastword $(subst vmlinuz-, ,$(lastword $(sort $(wildcard /boot/vmlinuz-*))))))
$(VM_DIR)/deskbox/.done: $(INIT) $(VNC) $(XTOOL) desktop-image/vm-relay.py desktop-image/vm-agent.py
	$(quiet) GEN $(VM_DIR)/deskbox
	$(Q)mkdir -p $(VM_DIR)/deskbox && cp $(INIT) $(VM_DIR)/deskbox/init && \
		cp $(VNC) $(VM_DIR)/deskbox/deskbox-vnc && cp $(XTOOL) $(VM_DIR)/deskbox/xtool && \
		cp desktop-image/vm-relay.py desktop-image/vm-agent.py $(VM_DIR)/deskbox/ && touch $@
# A stored image's /.deskbox in a VM: the image binaries with their own
# libraries (as a container's), and the guest's relay and agent.
$(VM_DIR)/deskbox-image/.done: $(IMAGE_BINS) $(IMAGE_DIR)/lib/.done desktop-image/vm-relay.py desktop-image/vm-agent.py
	$(quiet) GEN $(VM_DIR)/deskbox-image
	$(Q)rm -rf $(VM_DIR)/deskbox-image && mkdir -p $(VM_DIR)/deskbox-image && \
		cp $(IMAGE_DIR)/deskbox-init $(VM_DIR)/deskbox-image/init && \
		cp $(IMAGE_DIR)/deskbox-vnc $(VM_DIR)/deskbox-image/deskbox-vnc && \
		cp $(IMAGE_DIR)/deskbox-xtool $(VM_DIR)/deskbox-image/xtool && \
		cp -a $(IMAGE_DIR)/lib $(VM_DIR)/deskbox-image/lib && \
		cp desktop-image/vm-relay.py desktop-image/vm-agent.py $(VM_DIR)/deskbox-image/ && touch $@

bench: install-deps
	@$(SUBMAKE) bin
	@DESKBOX_BUILD=$(abspath $(BUILD)) python3 scripts/bench.py

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

compile_commands.json:
	$(MAKE) clean && bear -- $(MAKE) all

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj $(BUILD)/check-headers -name '*.d' 2>/dev/null)

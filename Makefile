# Paddock build. `make` builds the three programs into build/; `make check` runs the C unit
# tests; `make compdb` writes compile_commands.json for editors and clang-tidy.
#
# Layering (docs/architecture.md): src/lib is compiled with only its own packages' flags and
# may include nothing from src/daemon or src/cli; `make layering` checks that and runs in
# every build. The daemon may use lib; the CLI may use lib; neither includes the other.
CC      ?= cc
BUILD   ?= build
WERROR  ?= -Werror
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wno-unused-parameter -Wmissing-prototypes -Wshadow -Wformat=2 \
           -Wswitch-enum -Wundef -Wvla
CFLAGS  += -std=gnu11 $(WARN) $(WERROR) -D_GNU_SOURCE -fno-strict-aliasing \
           -fstack-protector-strong -D_FORTIFY_SOURCE=2 -Isrc -MMD -MP
SAN     ?=
CFLAGS  += $(SAN)
LDFLAGS += $(SAN)

# The registry client (src/lib/registry.c) is an HTTP *client* built on libcurl and belongs to
# the library; the HTTP *server* (libmicrohttpd) is daemon-only.
PKGS_LIB    := libseccomp libcap sqlite3 jansson libarchive libmnl libnftables nettle libcurl
PKGS_DAEMON := libmicrohttpd gnutls
# GnuTLS (https:// to a remote daemon, src/cli/tls.c) is compiled against but not linked: the
# CLI loads it with dlopen on its first TLS connection, by the soname of the library it was
# built against, so local use does not pay for loading and initialising it at every start.
PKGS_CLI    := gnutls
# The network gateway (src/gateway, docs/security.md) links only what it runs: GnuTLS, jansson
# for the control messages, libseccomp; not libpaddock.a (no curl, sqlite, nftables...).
PKGS_GATEWAY := gnutls jansson libseccomp
# wslay (WebSocket framing, lib/websocket.c) ships no pkg-config file in Debian.
LIBS_WS     := -lwslay

# pkg-config runs once per make, not once per object.
soname = $(shell objdump -p $(1) 2>/dev/null | awk '$$1 == "SONAME" { print $$2 }')
CURL_SONAME   := $(call soname,$(shell pkg-config --variable=libdir libcurl)/libcurl.so)
LIB_CFLAGS    := $(shell pkg-config --cflags $(PKGS_LIB)) \
                 $(if $(CURL_SONAME),-DCURL_SONAME='"$(CURL_SONAME)"')
# libcurl is compiled against but not linked: src/lib/curl_lazy.c loads it when first used.
LIB_LIBS      := $(shell pkg-config --libs $(filter-out libcurl,$(PKGS_LIB))) $(LIBS_WS)
DAEMON_CFLAGS := $(LIB_CFLAGS) $(shell pkg-config --cflags $(PKGS_DAEMON))
DAEMON_LIBS   := $(LIB_LIBS) $(shell pkg-config --libs $(PKGS_DAEMON))
# The CLI loads GnuTLS (src/cli/tls.c), libwslay and libnettle (src/cli/lazylib.c) with dlopen
# when first needed, by the sonames of the libraries it was built against.
GNUTLS_SONAME := $(call soname,$(shell pkg-config --variable=libdir gnutls)/libgnutls.so)
WSLAY_SONAME  := $(call soname,$(shell $(CC) -print-file-name=libwslay.so))
NETTLE_SONAME := $(call soname,$(shell pkg-config --variable=libdir nettle)/libnettle.so)
CLI_CFLAGS    := $(LIB_CFLAGS) $(shell pkg-config --cflags $(PKGS_CLI)) \
                 $(if $(GNUTLS_SONAME),-DGNUTLS_SONAME='"$(GNUTLS_SONAME)"') \
                 $(if $(WSLAY_SONAME),-DWSLAY_SONAME='"$(WSLAY_SONAME)"') \
                 $(if $(NETTLE_SONAME),-DNETTLE_SONAME='"$(NETTLE_SONAME)"')
# What every start of the CLI loads is what `ls` or `exec` runs on: libjansson and libc
# (bench/README.md "CLI start-up"). Not libwslay or libnettle, which the first WebSocket or
# TLS connection loads, so a call of theirs that lazylib.c does not forward fails the link.
CLI_LIBS      := $(filter-out $(LIBS_WS) -lnettle,$(LIB_LIBS))
GATEWAY_CFLAGS := $(shell pkg-config --cflags $(PKGS_GATEWAY))
GATEWAY_LIBS   := $(shell pkg-config --libs $(PKGS_GATEWAY)) -lm

LIB_SRC    := $(wildcard src/lib/*.c)
DAEMON_SRC := $(wildcard src/daemon/*.c)
CLI_SRC    := $(wildcard src/cli/*.c)
INIT_SRC   := $(wildcard src/init/*.c)
GATEWAY_SRC := $(wildcard src/gateway/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)

LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o)
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/%.o)
GATEWAY_OBJ := $(GATEWAY_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

all: layering $(BUILD)/paddockd $(BUILD)/paddock $(BUILD)/paddock-init $(BUILD)/paddock-gateway

$(BUILD)/src/lib/%.o: src/lib/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) $(LIB_CFLAGS) -c -o $@ $<

$(BUILD)/src/daemon/%.o: src/daemon/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) $(DAEMON_CFLAGS) -c -o $@ $<

$(BUILD)/src/cli/%.o: src/cli/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) $(CLI_CFLAGS) -c -o $@ $<

$(BUILD)/src/gateway/%.o: src/gateway/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) $(GATEWAY_CFLAGS) -c -o $@ $<

$(BUILD)/libpaddock.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/paddockd: $(DAEMON_OBJ) $(BUILD)/libpaddock.a
	$(CC) $(LDFLAGS) -o $@ $^ $(DAEMON_LIBS)

# --as-needed: the CLI speaks HTTP itself (src/cli/client.c), so only the libraries its part of
# libpaddock.a uses are loaded at start-up: no libcurl, whose loading was half the start time.
$(BUILD)/paddock: $(CLI_OBJ) $(BUILD)/libpaddock.a
	$(CC) $(LDFLAGS) -Wl,--as-needed -o $@ $^ $(CLI_LIBS)

$(BUILD)/paddock-gateway: $(GATEWAY_OBJ)
	$(CC) $(LDFLAGS) -Wl,--as-needed -o $@ $^ $(GATEWAY_LIBS)

# PID 1 inside every environment: static, tiny, no sanitizers (it runs in an empty root).
# Built against musl (Debian: musl-tools) when there is one: a static glibc program runs dozens
# of CPUID instructions at start (cache geometry for memcpy), each a VM exit under a
# hypervisor, ~1.2 ms of CPU per environment start against ~0.07 ms with musl. Without
# musl-gcc it falls back to the system compiler and says so. INIT_CC= overrides.
INIT_CC ?= $(shell command -v musl-gcc 2>/dev/null)
$(BUILD)/paddock-init: $(INIT_SRC)
	@mkdir -p $(dir $@)
	@[ -n "$(INIT_CC)" ] || echo "  NOTE    musl-gcc not found (apt install musl-tools): paddock-init uses glibc, ~1 ms more CPU per environment start"
	$(or $(INIT_CC),$(CC)) -std=gnu11 -O2 -Wall -Wextra $(WERROR) -D_GNU_SOURCE -Isrc -MMD -MP -static -o $@ $(INIT_SRC)

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libpaddock.a
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	@$(CC) $(CFLAGS) -Wno-missing-prototypes -Itests/unit $(LIB_CFLAGS) -o $@ $< $(BUILD)/libpaddock.a $(LDFLAGS) $(LIB_LIBS)

# The gateway's parser, token table and confinement are not in libpaddock.a.
GATEWAY_UNIT_OBJ := $(BUILD)/src/gateway/reqparse.o $(BUILD)/src/gateway/tokens.o \
                    $(BUILD)/src/gateway/confine.o $(BUILD)/src/gateway/ingress.o
$(BUILD)/tests/test_gateway_parse: tests/unit/test_gateway_parse.c $(GATEWAY_UNIT_OBJ)
	@mkdir -p $(dir $@)
	@echo "  TEST    $@"
	@$(CC) $(CFLAGS) -Wno-missing-prototypes -Itests/unit $(GATEWAY_CFLAGS) -o $@ $< \
	        $(GATEWAY_UNIT_OBJ) $(LDFLAGS) $(GATEWAY_LIBS)

# Each unit test program prints one "N passed, N failed, N skipped" line; exit 77 means it
# could not run here at all. The summary counts skips apart from passes.
check: $(UNIT_BIN)
	@./tests/unit/run.sh $(UNIT_BIN)

# The library must not reach up into the programs, and no program into the other.
layering:
	@bad=$$(grep -nE '#include +["<](daemon|cli)/|#include +<microhttpd\.h>' src/lib/*.[ch]; \
	        grep -nE '#include +["<]cli/' src/daemon/*.[ch]; \
	        grep -nE '#include +["<]daemon/|#include +<microhttpd\.h>' src/cli/*.[ch]; \
	        grep -nE '#include +["<]gateway/' src/lib/*.[ch] src/daemon/*.[ch] src/cli/*.[ch]; \
	        grep -nE '#include +["<](daemon|cli)/|#include +<microhttpd\.h>' src/gateway/*.[ch]); \
	 if [ -n "$$bad" ]; then echo "layering violation (docs/architecture.md):"; echo "$$bad"; exit 1; fi

# compile_commands.json for clangd / clang-tidy, with the exact flags each part is built with.
compdb:
	@{ echo '['; sep=''; \
	  for f in $(LIB_SRC); do printf '%s{"directory":"%s","file":"%s","command":"%s %s %s -c %s"}\n' "$$sep" "$(CURDIR)" "$$f" "$(CC)" "$(CFLAGS)" "$(LIB_CFLAGS)" "$$f"; sep=','; done; \
	  for f in $(DAEMON_SRC); do printf ',{"directory":"%s","file":"%s","command":"%s %s %s -c %s"}\n' "$(CURDIR)" "$$f" "$(CC)" "$(CFLAGS)" "$(DAEMON_CFLAGS)" "$$f"; done; \
	  for f in $(CLI_SRC); do printf ',{"directory":"%s","file":"%s","command":"%s %s %s -c %s"}\n' "$(CURDIR)" "$$f" "$(CC)" "$(CFLAGS)" "$(CLI_CFLAGS)" "$$f"; done; \
	  for f in $(UNIT_SRC); do printf ',{"directory":"%s","file":"%s","command":"%s %s -Itests/unit %s -c %s"}\n' "$(CURDIR)" "$$f" "$(CC)" "$(CFLAGS)" "$(LIB_CFLAGS)" "$$f"; done; \
	  echo ']'; } > compile_commands.json
	@echo "wrote compile_commands.json"

# Fuzzing (docs/hacking.md "Fuzzing"): libFuzzer targets in tests/fuzz, one per parser, built
# with clang, ASan and UBSan into $(BUILD)/fuzz against a libpaddock.a of their own.
# `make fuzz` runs each for FUZZ_SECONDS on a working corpus in $(BUILD)/fuzz/work, seeded from
# tests/fuzz/corpus; `make fuzz-smoke` runs each for FUZZ_SMOKE_SECONDS on a copy of the seeds
# in a temporary directory (the suite's short run). Either fails when a target finds a crash.
FUZZ_CC            ?= clang
FUZZ_SECONDS       ?= 600
FUZZ_SMOKE_SECONDS ?= 18
FUZZ_SAN           := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_SRC           := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN           := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/%)

fuzz-build:
	@CFLAGS="-O1 -g" $(MAKE) --no-print-directory BUILD=$(BUILD)/fuzz CC=$(FUZZ_CC) WERROR= \
	        SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" fuzz-bins

fuzz-bins: $(FUZZ_BIN)

$(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h $(BUILD)/libpaddock.a
	@echo "  FUZZ    $@"
	@$(CC) $(CFLAGS) -fsanitize=fuzzer -Wno-missing-prototypes $(DAEMON_CFLAGS) -o $@ $< \
	        $(BUILD)/libpaddock.a $(LDFLAGS) $(LIB_LIBS)

$(BUILD)/fuzz_gateway_parse: tests/fuzz/fuzz_gateway_parse.c tests/fuzz/fuzz.h $(BUILD)/src/gateway/reqparse.o
	@echo "  FUZZ    $@"
	@$(CC) $(CFLAGS) -fsanitize=fuzzer -Wno-missing-prototypes -o $@ $< \
	        $(BUILD)/src/gateway/reqparse.o $(LDFLAGS)

$(BUILD)/fuzz_gateway_ingress: tests/fuzz/fuzz_gateway_ingress.c tests/fuzz/fuzz.h $(BUILD)/src/gateway/reqparse.o $(BUILD)/src/gateway/ingress.o
	@echo "  FUZZ    $@"
	@$(CC) $(CFLAGS) -fsanitize=fuzzer -Wno-missing-prototypes -o $@ $< \
	        $(BUILD)/src/gateway/reqparse.o $(BUILD)/src/gateway/ingress.o $(LDFLAGS)

fuzz: fuzz-build
	@./tests/fuzz/run.sh $(FUZZ_SECONDS) $(BUILD)/fuzz/work $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)

fuzz-smoke: fuzz-build
	@work=$$(mktemp -d /tmp/paddock-fuzz.XXXXXX) && \
	 ./tests/fuzz/run.sh $(FUZZ_SMOKE_SECONDS) $$work $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%); \
	 rc=$$?; rm -rf $$work; exit $$rc

PREFIX ?= /usr/local
# The programs only; scripts/install.sh also installs the systemd unit, the state directory and
# the group (docs/operations.md). paddockd finds its helpers in ../lib/paddock.
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/lib/paddock
	install -m 0755 $(BUILD)/paddock $(DESTDIR)$(PREFIX)/bin/
	install -m 0755 $(BUILD)/paddockd $(DESTDIR)$(PREFIX)/sbin/
	install -m 0755 $(BUILD)/paddock-init $(BUILD)/paddock-gateway $(DESTDIR)$(PREFIX)/lib/paddock/

clean:
	rm -rf $(BUILD) compile_commands.json

format:
	clang-format -i src/*/*.c src/*/*.h tests/unit/*.c tests/unit/*.h

.PHONY: all check clean compdb format install layering fuzz fuzz-bins fuzz-build fuzz-smoke

-include $(LIB_OBJ:.o=.d) $(DAEMON_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(GATEWAY_OBJ:.o=.d) $(UNIT_BIN:=.d) $(BUILD)/paddock-init.d \
         $(FUZZ_BIN:=.d)

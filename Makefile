# Paddock build. `make` builds the three programs into build/; `make check` runs the C unit tests.
CC      ?= cc
BUILD   ?= build
WERROR  ?= -Werror
CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra $(WERROR) -Wno-unused-parameter -D_GNU_SOURCE \
           -fno-strict-aliasing -fstack-protector-strong -D_FORTIFY_SOURCE=2 -Isrc
SAN     ?=
CFLAGS  += $(SAN)
LDFLAGS += $(SAN)

PKGS_LIB    := libseccomp libcap sqlite3 jansson libarchive libmnl libnftables nettle
PKGS_DAEMON := $(PKGS_LIB) libmicrohttpd libcurl
PKGS_CLI    := libcurl jansson nettle
# wslay (WebSocket framing) ships no pkg-config file in Debian.
LIBS_WS     := -lwslay
cflags_of = $(shell pkg-config --cflags $(1))
libs_of   = $(shell pkg-config --libs $(1))

LIB_SRC    := $(wildcard src/lib/*.c)
DAEMON_SRC := $(wildcard src/daemon/*.c)
CLI_SRC    := $(wildcard src/cli/*.c)
INIT_SRC   := $(wildcard src/init/*.c)
UNIT_SRC   := $(wildcard tests/unit/test_*.c)

LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o)
DAEMON_OBJ := $(DAEMON_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ    := $(CLI_SRC:%.c=$(BUILD)/%.o)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

all: $(BUILD)/paddockd $(BUILD)/paddock $(BUILD)/paddock-init

$(BUILD)/%.o: %.c $(wildcard src/*/*.h)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CFLAGS) $(call cflags_of,$(PKGS_DAEMON) $(PKGS_CLI)) -c -o $@ $<

$(BUILD)/libpaddock.a: $(LIB_OBJ)
	ar rcs $@ $^

$(BUILD)/paddockd: $(DAEMON_OBJ) $(BUILD)/libpaddock.a
	$(CC) $(LDFLAGS) -o $@ $^ $(call libs_of,$(PKGS_DAEMON)) $(LIBS_WS)

$(BUILD)/paddock: $(CLI_OBJ) $(BUILD)/libpaddock.a
	$(CC) $(LDFLAGS) -o $@ $^ $(call libs_of,$(PKGS_CLI)) $(LIBS_WS)

# PID 1 inside every environment: static, tiny, no sanitizers (it runs in an empty root).
$(BUILD)/paddock-init: $(INIT_SRC)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -Wall -Wextra $(WERROR) -D_GNU_SOURCE -static -o $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libpaddock.a tests/unit/unit.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit $(call cflags_of,$(PKGS_LIB)) -o $@ $< $(BUILD)/libpaddock.a $(LDFLAGS) $(call libs_of,$(PKGS_LIB))

check: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

PREFIX ?= /usr/local
install: all
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(BUILD)/paddockd $(BUILD)/paddock $(BUILD)/paddock-init $(DESTDIR)$(PREFIX)/bin/

clean:
	rm -rf $(BUILD)

format:
	clang-format -i src/*/*.c src/*/*.h tests/unit/*.c tests/unit/*.h

.PHONY: all check clean format install

# Two commands do all the set-up on a fresh Debian 12 machine:
#   make run    install what is missing, then run the main job (cryptcost run)
#   make test   install what is missing, then run the whole test suite
PYTHON ?= python3
VENV   := .venv
PKGS   := $(shell grep -v '^\s*\#' packaging/debian-packages.txt | grep -v '^\s*$$')
STAMP  := $(VENV)/.installed
ARGS   ?=

.PHONY: run test deps debs venv gofuse man zfs clean bench

run: deps
	$(VENV)/bin/cryptcost run $(ARGS)

# With no ARGS: the unit tests on every CPU (they measure nothing, pytest-xdist), then the
# system tests one at a time (they measure, and must have the machine to themselves).
test: deps
ifeq ($(strip $(ARGS)),)
	$(VENV)/bin/python -m pytest -n auto tests/unit
	$(VENV)/bin/python -m pytest --ignore=tests/unit
else
	$(VENV)/bin/python -m pytest $(ARGS)
endif

deps: debs venv gofuse man zfs

# ZFS for cryptcost vm's guest (R1's ZFS): zfs-dkms builds its module for the stock kernel from
# Debian's contrib, read from apt lists of its own (this host's sources stay as they are). Done
# once; a host with the module and zfsutils-linux skips it.
zfs: debs
	@if [ "$$(id -u)" != 0 ]; then SUDO=sudo; fi; $$SUDO packaging/zfs-for-the-guest

# cryptcost(1), generated from the argument parser: `man .venv/share/man/man1/cryptcost.1`
# (or `man cryptcost` with the venv's bin on PATH, which man-db maps to ../share/man).
MANPAGE := $(VENV)/share/man/man1/cryptcost.1
man: $(MANPAGE)

$(MANPAGE): $(STAMP) $(wildcard src/cryptcost/cli/*.py)
	@mkdir -p $(dir $@)
	$(VENV)/bin/argparse-manpage --module cryptcost.cli --function build_parser --prog cryptcost \
	  --project-name cryptcost --manual-title "cryptcost manual" \
	  --description "what encryption costs on this machine, and which option to pick" --output $@

# gocryptfs's FUSE baseline: go-fuse's loopback, from the pinned module in
# packaging/gofuse (the Go module proxy; Debian's golang-go when no go is on PATH).
GOFUSE := $(VENV)/bin/cc-gofuse-loopback
gofuse: $(GOFUSE) $(GOFUSE).buildinfo

$(GOFUSE): packaging/gofuse/go.mod packaging/gofuse/go.sum | venv
	@command -v go >/dev/null || { if [ "$$(id -u)" != 0 ]; then SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq golang-go; }
	cd packaging/gofuse && go build -trimpath -o $(abspath $(GOFUSE)) github.com/hanwen/go-fuse/v2/example/loopback

# Its build record (the go-fuse module's version), which the loopback cannot print itself;
# without go on PATH its results say "unknown" for it.
$(GOFUSE).buildinfo: $(GOFUSE)
	@go version -m $< > $@.tmp && mv $@.tmp $@ || \
	  { rm -f $@.tmp; echo "no go on PATH: gofuse-loopback's version will read unknown" >&2; }

# apt-get only for what dpkg says is missing, so a second `make` is quick.
debs:
	@missing=""; for p in $(PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

venv: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --require-hashes -r requirements.lock
	$(VENV)/bin/pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Refresh the lock after changing dependencies in pyproject.toml.
lock:
	$(PYTHON) -m venv /tmp/pip-compile-venv && /tmp/pip-compile-venv/bin/pip install -q pip-tools && \
	/tmp/pip-compile-venv/bin/pip-compile -q --generate-hashes --allow-unsafe --extra test --extra build --strip-extras \
	  -o requirements.lock pyproject.toml && sed -i '/^--find-links/d' requirements.lock

bench: deps
	$(VENV)/bin/python bench/ciphers_vs_openssl

clean:
	rm -rf $(VENV) build src/*.egg-info

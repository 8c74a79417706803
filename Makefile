# Two commands do all the set-up on a fresh Debian 12 machine:
#   make run    install what the main job uses, then run it (cryptcost run)
#   make test   install what the tests use (every need), then run the whole test suite
# Every Debian package goes through `cryptcost install` (src/cryptcost/host/apt.py): no install
# starts a service or leaves one enabled (docs/setup.md).
PYTHON ?= python3
VENV   := .venv
STAMP  := $(VENV)/.installed
ARGS   ?=
SUDO   := $(if $(filter 0,$(shell id -u)),,sudo)
# Debian packages before the venv exists (python3-venv, go), the same guarded way.
APT    := $(SUDO) env PYTHONPATH=$(CURDIR)/src $(PYTHON) -m cryptcost.host.apt

.PHONY: run test deps test-deps venv gofuse man zfs clean bench

run: deps
	$(VENV)/bin/cryptcost run $(ARGS)

# With no ARGS: the unit tests on every CPU (they measure nothing, pytest-xdist), then the
# system tests one at a time (they measure, and must have the machine to themselves).
test: test-deps
ifeq ($(strip $(ARGS)),)
	$(VENV)/bin/python -m pytest -n auto tests/unit
	$(VENV)/bin/python -m pytest --ignore=tests/unit
else
	$(VENV)/bin/python -m pytest $(ARGS)
endif

# The main job's set-up: the venv, the go-fuse baseline, the man page, and what `cryptcost
# install run` names: the quick suite's engines and the stacks it measures on this host.
deps: venv gofuse man
	$(SUDO) $(VENV)/bin/cryptcost install run

# The tests' set-up: every need — every stack, the guest's kernels and qemu, ZFS's module (built
# by zfs-dkms from Debian contrib for the stock kernel), the browser that checks the report.
test-deps: deps
	$(SUDO) $(VENV)/bin/cryptcost install tests

# ZFS for cryptcost vm's guest alone (R1's ZFS); `make test` builds it too.
zfs: deps
	$(SUDO) $(VENV)/bin/cryptcost install zfs

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
	@command -v go >/dev/null || $(APT) run golang-go
	cd packaging/gofuse && go build -trimpath -o $(abspath $(GOFUSE)) github.com/hanwen/go-fuse/v2/example/loopback

# Its build record (the go-fuse module's version), which the loopback cannot print itself;
# without go on PATH its results say "unknown" for it.
$(GOFUSE).buildinfo: $(GOFUSE)
	@go version -m $< > $@.tmp && mv $@.tmp $@ || \
	  { rm -f $@.tmp; echo "no go on PATH: gofuse-loopback's version will read unknown" >&2; }

venv: $(STAMP)

# Debian's python3 makes a venv only with python3-venv (ensurepip).
$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import ensurepip' 2>/dev/null || $(APT) run python3-venv
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

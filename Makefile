# transfer-to-npu: every target sets up what it needs, so each works on a
# fresh machine.
PYTHON ?= python3
CC ?= gcc
CHECK_FLAGS := $(shell pkg-config --cflags --libs check 2>/dev/null)
PURE_C := src/devspec.c src/table.c src/ptrmap.c src/json.c src/rules.c
C_TESTS := $(wildcard tests/c/*.c)
BUILD := build

.PHONY: all deps build check pytest test bench demo clean

all: build

deps:
	@./scripts/install-deps.sh

# The extension, installed into the running Python (plain C, no torch needed
# at build time).
build: deps
	@rm -rf $(BUILD)/lib.* # no stale modules in the wheel
	$(PYTHON) -m pip install -q --no-build-isolation --no-deps .

# Unit tests of the pure-C parts (device strings, backend strings, table).
$(BUILD)/check_runner: $(C_TESTS) $(PURE_C) $(wildcard include/ttn/*.h) tests/c/suites.h | deps
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -Wall -Wextra -Werror -g -Iinclude -Itests/c $(C_TESTS) $(PURE_C) \
		$$(pkg-config --cflags --libs check) -o $@

check: $(BUILD)/check_runner
	$(BUILD)/check_runner

pytest: build
	$(PYTHON) -m pytest -q tests

test: check pytest

bench: build
	$(PYTHON) bench/run.py

# Train the quick-start CNN, written for CUDA, on the virtual NPU.
demo: build
	@mkdir -p $(BUILD)/demo
	cd $(BUILD)/demo && TRANSFER_TO_NPU_BACKEND=virtual $(PYTHON) ../../examples/train_cnn.py

clean:
	rm -rf $(BUILD) dist *.egg-info python/*.egg-info python/transfer_to_npu/*.so

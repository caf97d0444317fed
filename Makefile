# transfer-to-npu: every target sets up what it needs, so each works on a
# fresh machine.
PYTHON ?= python3
CC ?= gcc
CHECK_FLAGS := $(shell pkg-config --cflags --libs check 2>/dev/null)
PURE_C := $(wildcard src/pure/*.c)
C_TESTS := $(wildcard tests/c/*.c)
BUILD := build

.PHONY: all deps tools build wheel check pytest test test-torch bench demo sanitize fuzz valgrind clean

all: build

deps:
	@./scripts/install-deps.sh

# valgrind and clang (libFuzzer, sanitizers) for the reliability targets.
tools:
	@WITH_TOOLS=1 ./scripts/install-deps.sh

# The extension, installed into the running Python (plain C, no torch needed
# at build time).
build: deps
	@rm -rf $(BUILD)/lib.* # no stale modules in the wheel
	$(PYTHON) -m pip install -q --no-build-isolation --no-deps .

# A wheel of the package (the extension compiled), which installs without a
# compiler: dist/transfer_to_npu-*.whl.
wheel: deps
	@rm -rf $(BUILD)/lib.*
	$(PYTHON) -m pip wheel -q --no-build-isolation --no-deps -w dist .

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

# The patcher with torch_npu as backend (a stand-in without kernels) on
# each torch line of TORCH_VERSIONS, in a venv per line
# ($(TORCH_VENV_PREFIX)<line>, made by scripts/torch-venv.sh: PyPI's CUDA
# build of the torch that torch_npu's release for the line requires).
TORCH_VERSIONS ?= 2.1 2.6 2.14
TORCH_VENV_PREFIX ?= $(BUILD)/venv-torch-
test-torch: deps
	@for line in $(TORCH_VERSIONS); do \
		venv=$(TORCH_VENV_PREFIX)$$line; \
		./scripts/torch-venv.sh $$line $$venv && \
		$(MAKE) --no-print-directory build PYTHON=$$venv/bin/python && \
		echo "test-torch: torch $$line" && \
		TEST_TORCH_LINE=$$line $$venv/bin/python -m pytest -q --noconftest \
			-p no:cacheprovider tests/test_torch_lines.py || exit 1; \
	done

bench: build
	$(PYTHON) bench/run.py

# Train the quick-start CNN, written for CUDA, on the virtual NPU.
demo: build
	@mkdir -p $(BUILD)/demo
	cd $(BUILD)/demo && TRANSFER_TO_NPU_BACKEND=virtual $(PYTHON) ../../examples/train_cnn.py

# The pytest suite against the extension built with AddressSanitizer and
# UndefinedBehaviorSanitizer (preloaded: the interpreter itself is not
# instrumented; leak checking is off, as CPython keeps memory until exit).
SAN := $(BUILD)/sanitize
sanitize: deps
	rm -rf $(SAN) && mkdir -p $(SAN)/lib
	cp -r python/transfer_to_npu python/_transfer_to_npu_boot.py $(SAN)/lib/
	rm -f $(SAN)/lib/transfer_to_npu/*.so
	TTN_SANITIZE=1 $(PYTHON) setup.py -q build_ext --build-lib $(SAN)/lib --build-temp $(SAN)/temp
	LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	PYTHONPATH=$(CURDIR)/$(SAN)/lib $(PYTHON) -m pytest -q -p no:cacheprovider tests

# libFuzzer on the pure-C parsers (device/backend strings, the rules file),
# and atheris on the C core's device arguments (nested and self-holding
# containers among them), FUZZ_SECONDS each (default 300: 15 minutes).
FUZZ_SECONDS ?= 300
FUZZ := $(BUILD)/fuzz
fuzz: tools
	@mkdir -p $(FUZZ)/corpus-devspec $(FUZZ)/corpus-rules
	cp tests/fuzz/corpus/devspec/* $(FUZZ)/corpus-devspec/
	cp tests/fuzz/corpus/rules/* $(FUZZ)/corpus-rules/
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude \
		tests/fuzz/fuzz_devspec.c src/pure/devspec.c -o $(FUZZ)/fuzz_devspec
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Iinclude \
		tests/fuzz/fuzz_rules.c src/pure/rules.c src/pure/json.c -o $(FUZZ)/fuzz_rules
	$(FUZZ)/fuzz_devspec -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=$(FUZZ)/ \
		$(FUZZ)/corpus-devspec
	$(FUZZ)/fuzz_rules -max_total_time=$(FUZZ_SECONDS) -dict=tests/fuzz/rules.dict \
		-artifact_prefix=$(FUZZ)/ $(FUZZ)/corpus-rules
	$(PYTHON) -c "import atheris" 2>/dev/null || $(PYTHON) -m pip install -q atheris
	$(MAKE) --no-print-directory build
	@mkdir -p $(FUZZ)/corpus-devargs
	$(PYTHON) tests/fuzz/fuzz_devargs.py -max_total_time=$(FUZZ_SECONDS) \
		-artifact_prefix=$(FUZZ)/ $(FUZZ)/corpus-devargs

# The check suites under valgrind: no invalid access, no leak.
valgrind: $(BUILD)/check_runner tools
	CK_FORK=no valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=all \
		$(BUILD)/check_runner

clean:
	rm -rf $(BUILD) dist *.egg-info python/*.egg-info python/transfer_to_npu/*.so

# transfer-to-npu: every target sets up what it needs, so each works on a
# fresh machine.  The Python is the project venv, .venv, made from the
# system's python3 by the first target that needs it (a Debian/Ubuntu
# system Python refuses pip's installs, PEP 668); PYTHON=... runs another
# interpreter as it is, and no venv is made.
ifeq ($(origin PYTHON),undefined)
VENV := $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
VENV_PYTHON := $(PYTHON)
endif
CC ?= gcc
CHECK_FLAGS := $(shell pkg-config --cflags --libs check 2>/dev/null)
PURE_C := $(wildcard src/pure/*.c)
C_TESTS := $(wildcard tests/c/*.c)
BUILD := build

.PHONY: all deps deps-demo tools build wheel check pytest test test-torch test-libraries bench \
	demo sanitize fuzz valgrind clean

all: build

ifdef VENV
# The project venv, after the Debian packages it and the build need
# (python3-venv, python3-dev, gcc, uthash-dev).
$(VENV)/bin/python:
	@./scripts/install-deps.sh venv
	python3 -m venv $(VENV) || { rm -rf $(VENV); exit 1; }
endif

# What building and the demo need (the build's packages, torch), and what
# the tests need besides (check, pytest, the libraries tested).
deps-demo: $(VENV_PYTHON)
	@PYTHON=$(PYTHON) ./scripts/install-deps.sh demo

deps: $(VENV_PYTHON)
	@PYTHON=$(PYTHON) ./scripts/install-deps.sh test

# valgrind and clang (libFuzzer, sanitizers) for the reliability targets.
tools:
	@./scripts/install-deps.sh tools

# The extension, installed into the running Python (plain C, no torch needed
# at build time).
build: deps-demo
	@rm -rf $(BUILD)/lib.* # no stale modules in the wheel
	$(PYTHON) -m pip install -q --no-build-isolation --no-deps .

# A wheel of the package (the extension compiled), which installs without a
# compiler: dist/transfer_to_npu-*.whl.
wheel: deps-demo
	@rm -rf $(BUILD)/lib.*
	$(PYTHON) -m pip wheel -q --no-build-isolation --no-deps -w dist .

# Unit tests of the pure-C parts (device strings, backend strings, table),
# optimised as the extension is (its vector loops are what is tested).
$(BUILD)/check_runner: $(C_TESTS) $(PURE_C) $(wildcard include/ttn/*.h) tests/c/suites.h | deps
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -Wall -Wextra -Werror -g -O3 -Iinclude -Itests/c $(C_TESTS) $(PURE_C) \
		$$(pkg-config --cflags --libs check) -o $@

check: $(BUILD)/check_runner
	$(BUILD)/check_runner

pytest: build deps
	$(PYTHON) -m pytest -q tests

test: check pytest

# Other torch lines, each in a venv of its own ($(TORCH_VENV_PREFIX)<line>,
# made by scripts/torch-venv.sh: PyPI's CUDA build of the line's torch,
# which runs without a GPU).  A line the virtual NPU supports
# (VIRTUAL_NPU_LINES) runs the suite but the tests marked main_line (what
# does not differ between torch lines: pyproject.toml), with the test
# libraries installed there; an older one the patcher with torch_npu as
# backend (a stand-in without kernels, tests/test_torch_lines.py).
TORCH_VERSIONS ?= 2.1 2.10 2.14
VIRTUAL_NPU_LINES := 2.10 2.11 2.12 2.13 2.14
TORCH_VENV_PREFIX ?= $(BUILD)/venv-torch-
test-torch: deps
	@for line in $(TORCH_VERSIONS); do \
		venv=$(TORCH_VENV_PREFIX)$$line; \
		case " $(VIRTUAL_NPU_LINES) " in \
		*" $$line "*) tests=tests; select="not main_line";; \
		*) tests="--noconftest tests/test_torch_lines.py"; select="";; \
		esac; \
		./scripts/torch-venv.sh $$line $$venv && \
		$(MAKE) --no-print-directory build PYTHON=$$venv/bin/python && \
		{ [ "$$tests" != tests ] || PYTHON=$$venv/bin/python ./scripts/install-deps.sh test; } && \
		echo "test-torch: torch $$line: $$tests $${select:+-m \"$$select\"}" && \
		TEST_TORCH_LINE=$$line $$venv/bin/python -m pytest -q -p no:cacheprovider \
			$${select:+-m "$$select"} $$tests || exit 1; \
	done

# The tests of the libraries on their newest releases (transformers 5...):
# in a venv of its own over $(PYTHON)'s packages (torch is not installed
# again), whose site-packages hold the newer libraries.
LIBRARY_VENV ?= $(BUILD)/venv-libraries
LIBRARY_TESTS ?= tests/test_hf_libraries.py tests/test_flash_transformers.py \
	tests/test_lightning.py tests/test_deepspeed.py
test-libraries: deps
	@[ -x $(LIBRARY_VENV)/bin/python ] || $(PYTHON) -m venv $(LIBRARY_VENV)
	@$(PYTHON) -c "import sys; print(*(p for p in sys.path if p.endswith('-packages')), sep='\n')" \
		> $$($(LIBRARY_VENV)/bin/python -c "import sysconfig; print(sysconfig.get_path('purelib'))")/_base_packages.pth
	@PYTHON=$(LIBRARY_VENV)/bin/python LIBRARIES=newest ./scripts/install-deps.sh test
	$(MAKE) --no-print-directory build PYTHON=$(LIBRARY_VENV)/bin/python
	$(LIBRARY_VENV)/bin/python -m pytest -q $(LIBRARY_TESTS)

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
# atheris on the C core's device arguments (nested and self-holding
# containers among them), on the served attention's argument checks and on
# the static tools' source trees, FUZZ_SECONDS each (default 300: 25 minutes).
FUZZ_SECONDS ?= 300
FUZZ := $(BUILD)/fuzz
fuzz: tools deps-demo
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
	@mkdir -p $(FUZZ)/corpus-devargs $(FUZZ)/corpus-served
	$(PYTHON) tests/fuzz/fuzz_devargs.py -max_total_time=$(FUZZ_SECONDS) \
		-artifact_prefix=$(FUZZ)/ $(FUZZ)/corpus-devargs
	$(PYTHON) tests/fuzz/fuzz_served.py -max_total_time=$(FUZZ_SECONDS) \
		-artifact_prefix=$(FUZZ)/ $(FUZZ)/corpus-served
	@mkdir -p $(FUZZ)/corpus-static
	cp tests/fuzz/corpus/static/* $(FUZZ)/corpus-static/
	$(PYTHON) tests/fuzz/fuzz_static.py -max_total_time=$(FUZZ_SECONDS) \
		-artifact_prefix=$(FUZZ)/ $(FUZZ)/corpus-static

# The check suites under valgrind: no invalid access, no leak.
valgrind: $(BUILD)/check_runner tools
	CK_FORK=no valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=all \
		$(BUILD)/check_runner

clean:
	rm -rf $(BUILD) dist *.egg-info python/*.egg-info python/transfer_to_npu/*.so

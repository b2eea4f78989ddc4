#!/usr/bin/env bash
# The C++ core under AddressSanitizer and UndefinedBehaviorSanitizer: builds build/asan
# (-DFUSIONJIT_SANITIZE=ON), runs the C++ tests, then a subset of the Python tests against
# that build (libasan preloaded into the interpreter). Generated code is not instrumented;
# everything fusionjit's C++ does around it is. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
BUILD=build/asan
PKG=$BUILD/pkg

echo "sanitize: building $BUILD (ASan + UBSan)"
# -O1 and no link-time optimisation: the checks need neither, and they would double the
# build's time (the longest stage of CI).
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSIONJIT_SANITIZE=ON \
  -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
  -DFUSIONJIT_BUILD_TESTS=ON -DFUSIONJIT_PY_OUT_DIR="$PWD/$PKG/fusionjit" \
  -DPython_EXECUTABLE="$(command -v "$PY")" >/dev/null
cmake --build "$BUILD"

# The Python package beside the sanitized extension.
mkdir -p "$PKG/fusionjit"
(cd python/fusionjit && find . -name '*.py' -print0 | while IFS= read -r -d '' f; do
  mkdir -p "../../$PKG/fusionjit/$(dirname "$f")"; cp -p "$f" "../../$PKG/fusionjit/$f"; done)

export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:halt_on_error=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export FJ_CHECKS=1

echo "sanitize: C++ tests"
ctest --test-dir "$BUILD" --output-on-failure -j2

# (Not the compile-time bounds: the sanitized compiler is several times slower. Not the
# tests forking while another thread compiles: their children hung in this run (once
# before the JIT waited for compiles around a fork; the new first-compilation test's child
# in 1 of its 8 forks with the fix in place, which the normal build did not in 30 runs), as g++
# 12's ASan runtime may not lock its own allocator around fork; they run in the normal
# suite.)
# Two workers, as the main run: each inherits the preloaded sanitizers (4 min 31 s in one
# process, 2 min 14 s in two).
echo "sanitize: Python tests (a subset) against the sanitized extension"
ASAN_LIB=$(g++ -print-file-name=libasan.so)
UBSAN_LIB=$(g++ -print-file-name=libubsan.so)
cd tests
LD_PRELOAD="$ASAN_LIB $UBSAN_LIB" PYTHONPATH="$PWD/../$PKG" FJ_STRESS_SECONDS=${FJ_STRESS_SECONDS:-2} \
  $PY -m pytest -q -p no:cacheprovider -n 2 \
  test_reliability.py test_threads_memory.py test_jit.py test_errors.py test_whole_loop.py \
  test_array_api.py::test_from_dlpack_shares_aligned_memory_and_keeps_it_alive \
  test_array_api.py::test_from_dlpack_copies_what_it_cannot_share \
  test_small_dtypes.py::test_constant_folding_gives_the_compiled_bits \
  test_small_dtypes.py::test_reductions_and_dot_accumulate_in_float32 test_gather.py \
  test_dot_layout.py test_vmap.py \
  -k "not memory_is_flat and not compiles_in_seconds and not forks_while_another_thread and not a_fork_during_another_threads_first" "$@"

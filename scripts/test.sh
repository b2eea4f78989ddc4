#!/usr/bin/env bash
# Runs every test and check: static checks (ruff, layering, file length), the C++ tests
# (ctest) and the Python tests (pytest, with JAX and Gymnasium installed so every
# comparison with them runs), all with the IR verifier after every pass (FJ_CHECKS=1), the
# kernel tests again on the emulated GPU (FJ_NO_GPU_EMULATION=1 skips them), then
# the C++ core under ASan + UBSan (scripts/sanitize.sh; FJ_NO_SANITIZE=1 skips it).
# Installs what is missing first. Extra arguments go to the main pytest run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
./scripts/setup.sh
export FJ_CHECKS=1
echo "test: static checks"
./scripts/lint.sh
echo "test: C++ tests"
ctest --test-dir build/release --output-on-failure -j2
echo "test: Python tests"
# Run from tests/ so that the installed package, not python/fusionjit, is imported.
(cd tests && $PY -m pytest -q -n 2 -p no:cacheprovider "$@" .)
if [ "${FJ_NO_GPU_EMULATION:-0}" != 1 ]; then
  # The GPU backend without a GPU: the kernel tests again with every kernel compiled for the
  # GPU and run by the emulator (checked against NumPy as on the CPU), and its PTX assembled
  # by ptxas for sm_90 (tests/test_gpu.py assembles its own kernels for sm_80 and sm_90).
  echo "test: GPU kernels, emulated"
  ptx_check=""
  if command -v ptxas >/dev/null || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas" ]; then
    ptx_check=sm_90
  fi
  # (Not the tests that check JAX's random bits on large draws, the CPU's thread counts or
  # its compile times, nor the special functions' accuracy sweeps over thousands of mpmath
  # values, the random convolutions and the convolutions' second and float64 derivatives:
  # the CPU run covers those, and emulated they cost minutes.)
  # LLVM's loop strength reduction spends seconds on the emulation's scalar kernels (each
  # element's PRNG hash is hundreds of values derived from the loop's index: 5 s of a 5.2 s
  # compile of randint) and changes nothing this run checks: it is off here, halving the
  # random tests' time. (NVPTX runs the same pass on the same kernels for a real GPU.)
  (cd tests && FUSIONJIT_DEFAULT_BACKEND=gpu_emulated FJ_CHECK_PTX=$ptx_check \
    FJ_LLVM_OPTIONS="-disable-lsr ${FJ_LLVM_OPTIONS:-}" \
    $PY -m pytest -q -n 2 -p no:cacheprovider -m "not slow" \
    -k "not bit_exact_with_jax_live and not depend_on_the_thread_count and not compiles_in_seconds and not within_a_few_ulp and not within_its_conditioning and not match_mpmath and not random_convolutions and not second_derivatives and not float64_cotangents" \
    test_ops.py test_loops.py test_whole_loop.py test_multi_output.py test_random.py \
    test_small_dtypes.py test_gather.py test_special.py test_conv.py test_dot_layout.py \
    test_vmap.py test_top_k.py)
fi
if [ "${FJ_NO_SANITIZE:-0}" != 1 ]; then
  echo "test: sanitizers"
  ./scripts/sanitize.sh
fi

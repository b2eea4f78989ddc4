"""Every function-local static in cpp/ is made at import or is safe to make lazily.

A function-local static whose initialiser is running in one thread when another forks stays
"being initialised" in the child, whose first use of it then waits forever (a child forked
while another thread compiled hung on the cost model's cache size, made at first compile).
So each such static is listed here with the reason it is safe, and a new one fails this
check until it is: "import" ones are made by bindings/module.cc as the extension loads
(checked), the others say why no fork can find them half made.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# A static variable declared in a function body: indented, not constexpr, named in
# snake_case (STYLE.md: functions, static member ones too, are CamelCase).
STATIC = re.compile(r"^\s+static\s+(?!constexpr\b)[^(=;{]*?\b(?P<name>[a-z_]\w*)\s*(=|\{|;|\()")

# (file, variable) -> why its lazy initialisation cannot hang a forked child.
SAFE = {
    ("runtime/buffer.cc", "cache"): "import",
    ("runtime/thread_pool.cc", "once"): "import",
    ("runtime/host_callback.cc", "registry"): "import",
    ("runtime/custom_calls.cc", "calls"): "import",
    ("support/flags.cc", "flags"): "import",
    ("support/flags.cc", "mu"): "constant-initialised: no guard",
    ("support/target.cc", "bytes"): "import",
    ("codegen/cpu/cpu_compiler.cc", "f16c"): "import",
    ("codegen/cpu/cpu_compiler.cc", "lanes"): "import",
    ("codegen/cpu/jit.cc", "parsed"): "import: made with the JIT engine",
    ("codegen/cpu/jit.cc", "failed"): "import: made with the JIT engine",
    ("codegen/cpu/jit.cc", "words"): "import: made with the JIT engine",
    ("codegen/cpu/jit.cc", "once"): "import",
    ("codegen/cpu/jit.cc", "engine"): "import",
    ("compiler/code_cache.cc", "cache"): "import",
    ("bindings/array.cc", "num"): "constant-initialised: no guard",
    ("bindings/array.cc", "nums"): "import",
    ("bindings/module.cc", "invalid"): "import",
    ("bindings/module.cc", "internal"): "import",
    ("bindings/module.cc", "device"): "import",
    ("passes/pass.cc", "counter"): "constant-initialised: no guard",
    ("bindings/jit_function.cc", "numpy_generic"): "made holding the GIL, which a fork needs",
    ("bindings/pytree.cc", "registry"): "made holding the GIL, which a fork needs",
    ("runtime/cuda/cuda_device.cc", "opened"): "GPU only: CUDA does not survive a fork",
    ("runtime/cuda/cuda_driver.cc", "loaded"): "GPU only: CUDA does not survive a fork",
    ("runtime/gpu/emulated_device.cc", "points"): "GPU emulator: constant addresses",
    ("runtime/gpu/emulated_device.cc", "device"): "GPU emulator (tests only)",
    ("codegen/gpu/nvptx.cc", "once"): "GPU only: the NVPTX target's registration",
}


def main():
    found = {}
    for path in sorted((ROOT / "cpp").rglob("*")):
        if path.suffix not in (".cc", ".h") or "tests" in path.parts:
            continue
        rel = path.relative_to(ROOT / "cpp").as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            m = STATIC.match(line)
            if m and not line.lstrip().startswith("static_"):
                found[(rel, m["name"])] = f"cpp/{rel}:{number}"
    errors = [f"{where}: function-local static '{name}' is made lazily; make it at import "
              f"(bindings/module.cc) and list it in scripts/check_fork_safety.py, or say there "
              f"why a fork cannot find it half made" for (rel, name), where in found.items()
              if (rel, name) not in SAFE]
    errors += [f"scripts/check_fork_safety.py: {rel}'s '{name}' is listed but not found"
               for rel, name in SAFE if (rel, name) not in found]
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())

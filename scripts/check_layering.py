#!/usr/bin/env python3
"""Checks the layering of fusionjit (DESIGN.md, "Layers and their rooms"; STYLE.md,
"Layering") by reading includes and imports; run from anywhere, it checks the repo it is in.

C++ (every file under cpp/<layer>/, subfolders such as codegen/cpu or runtime/cuda belong to
their top folder):
  1. A project include (`#include "X/..."` or `<X/...>` with X a folder of cpp/) must name
     the file's own layer, `support`, or a layer in ALLOWED_INCLUDES below.
  2. Nothing outside cpp/bindings/ includes a bindings/ header.
  3. LLVM headers (`llvm/...`, `llvm-c/...`) only under cpp/codegen/.
  4. CUDA headers (`cuda.h`, `cuda_runtime*.h`) nowhere: the driver is loaded with dlopen.
  5. Python and pybind11 headers (`pybind11/...`, `Python.h`, `frameobject.h`) only under
     cpp/bindings/, the one translation layer to Python.
  6. Every folder of cpp/ is a layer named in ALLOWED_INCLUDES (a new one must be placed).

Python:
  7. Only the modules in CORE_IMPORTERS (paths under python/fusionjit/) import the C++
     extension `fusionjit._core`, in any spelling: `from fusionjit import _core`,
     `import fusionjit._core`, `from fusionjit._core import ...`, relative forms, or
     `importlib.import_module("fusionjit._core")`.
  8. benchmarks/, notebooks/ and examples/ (*.py and the code cells of *.ipynb) use only
     public fusionjit names: no import of, and no attribute access to, a name starting
     with `_` under fusionjit (`fusionjit._src`, `fusionjit._core`, ...).

Exit status 1 with one line per violation (path:line: rule: detail), else 0 and a summary.
Standard library only; Python 3.10+.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

# Python modules allowed to import the C++ extension, each with why it needs it. DESIGN.md
# wants only _src/ here; __init__.py is a public module that reaches _core directly today
# (a candidate for moving behind _src/).
CORE_IMPORTERS = {
    "__init__.py": "devices() reports the host CPU and the GPU from C++; DeviceError",
    "_src/tree_util.py": "pytrees are flattened and rebuilt in C++ (PyTreeDef, registry)",
    "_src/api.py": "Jitted subclasses the C++ JitFunction fast path; C++ tree_flatten",
    "_src/array.py": "Array is the C++ buffer type; NumPy <-> Array transfer",
    "_src/config.py": "pushes flags (x64, checks, disable_jit, cache size) into C++",
    "_src/lowering.py": "builds the C++ IR through its ModuleBuilder",
    "_src/dispatch.py": "runs executables; a device's errors are _core.DeviceError",
}

# Layer -> the other layers whose headers it may include (itself and `support` always).
_ALL = {"support", "ir", "analysis", "passes", "fusion", "codegen", "runtime", "compiler",
        "bindings"}
ALLOWED_INCLUDES: dict[str, set[str]] = {
    "support": set(),
    "ir": set(),
    "analysis": {"ir"},
    "passes": {"ir", "analysis"},
    "fusion": {"ir", "analysis", "passes"},
    # The CPU/GPU compilers produce runtime Executables (runtime/*.h hold no codegen code).
    "codegen": {"ir", "analysis", "runtime"},
    "runtime": {"ir"},
    "compiler": _ALL - {"bindings"},
    "bindings": _ALL,
}

LLVM_LAYERS = {"codegen"}
PYTHON_HEADER_LAYERS = {"bindings"}
PUBLIC_API_DIRS = ("benchmarks", "notebooks", "examples")

ROOT = Path(__file__).resolve().parent.parent
CPP = ROOT / "cpp"
PKG = ROOT / "python" / "fusionjit"

_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
_CUDA = re.compile(r"^(cuda|cuda_runtime\w*)\.h$")
_PY_HEADER = re.compile(r"^(pybind11/|Python\.h$|frameobject\.h$)")
_CPP_SUFFIXES = {".h", ".hh", ".hpp", ".cc", ".cpp", ".cxx", ".cu", ".inc", ".def"}


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# --- C++ ----------------------------------------------------------------------------------

def check_cpp(errors: list[str]) -> tuple[int, int]:
    n_files = n_includes = 0
    if not CPP.is_dir():
        return 0, 0
    for path in sorted(CPP.rglob("*")):
        if not path.is_file() or path.suffix not in _CPP_SUFFIXES:
            continue
        parts = path.relative_to(CPP).parts
        layer = parts[0] if len(parts) > 1 else None
        if layer not in ALLOWED_INCLUDES:
            folder = f"cpp/{layer}/" if layer else "cpp/ (top level)"
            errors.append(f"{rel(path)}:1: unknown layer: {folder} is not in "
                          f"ALLOWED_INCLUDES; place it in the layering table")
            continue
        n_files += 1
        allowed = ALLOWED_INCLUDES[layer] | {layer, "support"}
        text = path.read_text(encoding="utf-8", errors="replace")
        for lineno, line in enumerate(text.splitlines(), 1):
            m = _INCLUDE.match(line)
            if not m:
                continue
            n_includes += 1
            target = m.group(2).strip()
            where = f"{rel(path)}:{lineno}"
            top = target.split("/", 1)[0]
            if _CUDA.match(target.rsplit("/", 1)[-1]):
                errors.append(f"{where}: no CUDA headers: #include {target!r} (the driver is "
                              f"loaded with dlopen; declare what is needed in runtime/cuda/)")
            elif top in ("llvm", "llvm-c"):
                if layer not in LLVM_LAYERS:
                    errors.append(f"{where}: LLVM headers only under cpp/codegen/: "
                                  f"cpp/{layer}/ includes {target!r}")
            elif _PY_HEADER.match(target):
                if layer not in PYTHON_HEADER_LAYERS:
                    errors.append(f"{where}: Python/pybind11 headers only under cpp/bindings/: "
                                  f"cpp/{layer}/ includes {target!r}")
            elif "/" in target and top in _ALL:
                if top == "bindings" and layer != "bindings":
                    errors.append(f"{where}: nothing includes bindings/: cpp/{layer}/ "
                                  f"includes {target!r}")
                elif top not in allowed:
                    may = ", ".join(sorted(ALLOWED_INCLUDES[layer])) or "nothing but support"
                    errors.append(f"{where}: layering: cpp/{layer}/ may not include {top}/ "
                                  f"({target!r}); {layer} may use: {may}")
    return n_files, n_includes


# --- Python -------------------------------------------------------------------------------

def _absolute(module: str | None, level: int, package: str) -> str:
    """The absolute module named by `from <level dots><module> import ...` in `package`."""
    if level == 0:
        return module or ""
    base = package.split(".")
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([module] if module else []))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(tree: ast.AST, package: str):
    """Yields (line, absolute dotted name) for every module or name imported in ``tree``,
    including string arguments of importlib.import_module / __import__."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(node.module, node.level, package)
            yield node.lineno, mod
            for a in node.names:
                if a.name != "*":
                    yield node.lineno, f"{mod}.{a.name}"
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            arg = node.args[0]
            if (fname in ("import_module", "__import__") and isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)):
                yield node.lineno, arg.value


def _package_of(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    else:
        parts = parts[:-1]
    return ".".join(parts)


def check_core_importers(errors: list[str], warnings: list[str]) -> tuple[int, int]:
    n_files = 0
    importers: set[str] = set()
    for path in sorted(PKG.rglob("*.py")):
        n_files += 1
        name = path.relative_to(PKG).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        except SyntaxError as e:
            errors.append(f"{rel(path)}:{e.lineno}: cannot parse: {e.msg}")
            continue
        lines = set()
        for lineno, mod in _imports(tree, _package_of(path)):
            if mod == "fusionjit._core" or mod.startswith("fusionjit._core."):
                importers.add(name)
                if name not in CORE_IMPORTERS and lineno not in lines:
                    lines.add(lineno)
                    errors.append(
                        f"{rel(path)}:{lineno}: _core import outside the allowed modules: "
                        f"only {', '.join(sorted(CORE_IMPORTERS))} import fusionjit._core "
                        f"(go through _src/, or add this module to CORE_IMPORTERS with why)")
    for name in sorted(set(CORE_IMPORTERS) - importers):
        warnings.append(f"python/fusionjit/{name} no longer imports _core; "
                        f"remove it from CORE_IMPORTERS")
    return n_files, len(importers)


def _public_api_violations(source: str, where: str, first_line: int = 1) -> list[str]:
    """Uses of private fusionjit names in a script or notebook cell."""
    out = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        # Not Python (or cell magics): fall back to a textual search.
        for i, line in enumerate(source.splitlines()):
            m = re.search(r"\bfusionjit(\.\w+)*\.(_[A-Za-z]\w*)|"
                          r"\bfrom\s+fusionjit[\w.]*\s+import\s+.*\b(_[A-Za-z]\w*)", line)
            if m:
                out.append(f"{where}:{first_line + i}: private fusionjit name: {m.group(0)!r}")
        return out
    aliases: dict[str, str] = {}  # local name -> fusionjit dotted path it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "fusionjit":
                    if a.asname:
                        aliases[a.asname] = a.name
                    else:
                        aliases["fusionjit"] = "fusionjit"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] == "fusionjit":
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    seen = set()
    for lineno, mod in _imports(tree, ""):
        if (mod.split(".")[0] == "fusionjit" and any(_is_private(p) for p in mod.split("."))
                and lineno not in seen):
            seen.add(lineno)
            out.append(f"{where}:{first_line + lineno - 1}: private fusionjit import: {mod} "
                       f"(use only the public API)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                out.append(f"{where}:{first_line + node.lineno - 1}: private fusionjit name: "
                           f"{ast.unparse(node)} (use only the public API)")
    return out


def check_public_api_users(errors: list[str]) -> int:
    n_files = 0
    for d in PUBLIC_API_DIRS:
        base = ROOT / d
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix == ".py" and path.is_file():
                n_files += 1
                errors += _public_api_violations(path.read_text(encoding="utf-8"), rel(path))
            elif path.suffix == ".ipynb" and path.is_file() and \
                    ".ipynb_checkpoints" not in path.parts:
                n_files += 1
                try:
                    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
                except (json.JSONDecodeError, AttributeError) as e:
                    errors.append(f"{rel(path)}:1: cannot read notebook: {e}")
                    continue
                for k, cell in enumerate(cells, 1):
                    if cell.get("cell_type") != "code":
                        continue
                    src = cell.get("source", "")
                    src = "".join(src) if isinstance(src, list) else src
                    # IPython magics and shell lines are not Python: blank them, keep lines.
                    src = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln
                                    for ln in src.splitlines())
                    errors += _public_api_violations(src, f"{rel(path)} (cell {k})")
    return n_files


def main() -> int:
    errors: list[str] = []
    warnings: list[str] = []
    n_cpp, n_inc = check_cpp(errors)
    n_py, n_core = check_core_importers(errors, warnings)
    n_pub = check_public_api_users(errors)
    for w in warnings:
        print(f"check_layering: warning: {w}")
    if errors:
        for e in errors:
            print(e)
        print(f"check_layering: {len(errors)} violation(s); the rules are in the docstring "
              f"of scripts/check_layering.py")
        return 1
    print(f"check_layering: OK ({n_cpp} C++ files, {n_inc} includes; {n_py} Python modules, "
          f"{n_core} importing _core; {n_pub} benchmark/notebook/example files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

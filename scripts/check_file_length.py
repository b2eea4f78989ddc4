#!/usr/bin/env python3
"""Keeps the core's size visible (STYLE.md, "Naming and size"): prints the 10 longest
tracked source files under cpp/ and python/ (*.cc, *.h, *.py, per `git ls-files`) and fails
(exit 1) if any has more than MAX_LINES lines. Standard library only; Python 3.10+."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MAX_LINES = 900
SHOW = 10
ADVICE = "split it along a seam the design names (STYLE.md: aim under ~600 lines)"

ROOT = Path(__file__).resolve().parent.parent


def tracked_sources() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--", "cpp/*.cc", "cpp/*.h", "python/*.py"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return sorted(p for p in out.split("\0") if p)


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        data = f.read()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def main() -> int:
    counts = []
    for name in tracked_sources():
        path = ROOT / name
        if path.is_file():  # tracked but deleted in the working tree: nothing to count
            counts.append((count_lines(path), name))
    counts.sort(key=lambda c: (-c[0], c[1]))
    print(f"check_file_length: the {min(SHOW, len(counts))} longest of {len(counts)} files:")
    for n, name in counts[:SHOW]:
        print(f"  {n:6d}  {name}")
    over = [(n, name) for n, name in counts if n > MAX_LINES]
    for n, name in over:
        print(f"{name}: {n} lines (more than {MAX_LINES}): {ADVICE}")
    if over:
        print(f"check_file_length: {len(over)} file(s) over {MAX_LINES} lines")
        return 1
    print(f"check_file_length: OK (none over {MAX_LINES} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

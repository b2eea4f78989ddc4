"""fusionjit's benchmarks; each script also runs on its own (python3 benchmarks/<name>.py)."""

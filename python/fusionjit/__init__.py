"""fusionjit: a JAX-style JIT compiler."""

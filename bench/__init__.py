"""tether's benchmark harness: ``python -m bench run`` (see docs/benchmarks.md)."""

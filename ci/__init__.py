"""CI and benchmark entry points, run from the repository root: ``python3 -m ci.pipeline``, ``python3 -m ci.bench_miles``."""

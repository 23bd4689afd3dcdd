"""CI and benchmark entry points, run as modules from the repository root (``python3 -m ci.pipeline``)."""

"""Import-gate verification that runs inside an image with the image's own python.

Stdlib only, Python >= 3.9: this package is copied into arbitrary images (``python -m verify``) and must not
depend on anything the image may or may not have. Everything in this folder goes into images (with ``probes/``,
scripts that command gates run); host-side code lives in ``toolkit/`` and ``overlay_guard/``.
"""

import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

__all__ = ["PACKAGE_DIR"]

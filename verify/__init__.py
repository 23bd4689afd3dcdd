"""Import-gate verification that runs inside an image with the image's own python.

Stdlib only, Python >= 3.9: this package is copied into arbitrary images (``python -m verify``) and must not
depend on anything the image may or may not have. It also carries the overlay guard (``verify.overlays``) and the
container-structure-test exporter (``verify.cst``) that the host-side toolkit imports.
"""
import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

__all__ = ["PACKAGE_DIR"]

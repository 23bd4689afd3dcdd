"""Make a source tree's pyproject.toml the manifest of the platform being built (a build step runs this with the
image's python, before pip installs the tree).

sglang keeps one manifest per platform in `python/`: `pyproject.toml` is CUDA 13's (cuda-python>=13,
flashinfer_python[cu13], nvidia-cutlass-dsl[cu13]); ROCm installs from `pyproject_other.toml`; CUDA 12 images rewrite
the three CUDA 13 markers. An editable install publishes the manifest's requirements to every later `pip check` and
resolve, so the installed metadata must be the platform's own. The spec names the file and the literal rewrites as
data; each rewrite must match, so a manifest that drifted fails the build instead of keeping the wrong requirement.
Standard library only.

    python pyproject.py DIR [--use FILE] [--replace OLD NEW]...
"""

import argparse
import os
import shutil
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir", help="the folder holding pyproject.toml")
    p.add_argument("--use", metavar="FILE", help="a manifest beside it that becomes pyproject.toml")
    p.add_argument("--replace", nargs=2, action="append", default=[], metavar=("OLD", "NEW"))
    args = p.parse_args(argv)
    target = os.path.join(args.dir, "pyproject.toml")
    if args.use:
        source = os.path.join(args.dir, args.use)
        if not os.path.isfile(source):
            print("pyproject.py: no %s in %s" % (args.use, args.dir), file=sys.stderr)
            return 1
        shutil.copyfile(source, target)
    with open(target, encoding="utf-8") as fh:
        text = fh.read()
    for old, new in args.replace:
        if old not in text:
            print("pyproject.py: %r is not in %s" % (old, target), file=sys.stderr)
            return 1
        text = text.replace(old, new)
    with open(target, "w", encoding="utf-8") as fh:
        fh.write(text)
    print("pyproject.py: %s%s, %d rewrite(s)" % (target, " from " + args.use if args.use else "", len(args.replace)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Print a requirements file without the named distributions (a build step runs this with the image's python).

Upstream images drop requirements that cannot install on a platform (nvidia-resiliency-ext on ROCm); the spec
names them as data and this filter removes exactly those lines, by normalised PEP 503 name, and nothing else.
Standard library only: it runs before anything is installed.

    python requirements.py FILE [--exclude NAME]...
"""

import argparse
import re
import sys

NAME_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def keep(lines, excluded):
    gone = {normalise(n) for n in excluded}
    for line in lines:
        m = NAME_RE.match(line)
        if m and normalise(m.group(1)) in gone:
            continue
        yield line


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--exclude", action="append", default=[], metavar="NAME")
    args = p.parse_args(argv)
    with open(args.file) as fh:
        lines = fh.read().splitlines()
    kept = list(keep(lines, args.exclude))
    missing = {normalise(n) for n in args.exclude} - {normalise(m.group(1)) for m in map(NAME_RE.match, lines) if m}
    if missing:  # an exclusion that matches nothing is a stale spec entry: say so, loudly
        print("requirements.py: not in %s: %s" % (args.file, ", ".join(sorted(missing))), file=sys.stderr)
        return 1
    sys.stdout.write("".join(line + "\n" for line in kept))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Print a requirements file without the named requirements (stdlib only; runs inside an image build).

``python3 filter_requirements.py FILE [NAME...]`` writes FILE to stdout minus every requirement whose project name
matches a NAME (compared normalised, PEP 503). The names come from the image spec, so what an image leaves out is
data there, not an edit of the file. Exits 1 when a NAME matches nothing: a stale exclusion must be noticed and
removed from the spec, not carried forever.
"""
import re
import sys

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(line: str):
    """The project name a requirements line installs, or None (comments, blank lines, options such as -r/-e)."""
    text = line.split("#", 1)[0].strip() if not line.lstrip().startswith("-") else ""
    match = _NAME.match(text)
    return normalise(match.group(1)) if match else None


def filter_lines(lines, excluded):
    """(kept lines, excluded names that matched nothing)."""
    wanted = {normalise(n) for n in excluded}
    kept, hit = [], set()
    for line in lines:
        name = requirement_name(line)
        if name in wanted:
            hit.add(name)
            continue
        kept.append(line)
    return kept, sorted(wanted - hit)


def main(argv) -> int:
    if not argv:
        sys.stderr.write("usage: filter_requirements.py FILE [NAME...]\n")
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        kept, unused = filter_lines(fh.read().splitlines(keepends=True), argv[1:])
    if unused:
        sys.stderr.write("filter_requirements: %s: no requirement named %s\n" % (argv[0], ", ".join(unused)))
        return 1
    sys.stdout.write("".join(kept))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

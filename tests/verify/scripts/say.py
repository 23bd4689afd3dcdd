"""A command gate's program for the runner tests: prints each argument on a line; `--exit N` first sets the code."""

import sys

args = sys.argv[1:]
code = 0
if args[:1] == ["--exit"]:
    code, args = int(args[1]), args[2:]
for line in args:
    print(line)
sys.exit(code)

"""A command gate's program for the runner tests: prints its arguments, exits with their count less two."""

import sys

print(sys.argv[1:])
sys.exit(len(sys.argv) - 3)

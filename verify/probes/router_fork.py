"""The router is miles' fork (radixark/sgl-router-for-miles), not PyPI's sglang-router of the same version.

miles routes session servers by key (`consistent_hashing` or `manual`, miles/rollout/generate_utils): PyPI's
sglang-router 0.3.2 has the Rust enum but neither its CLI nor `policy_from_str` takes `consistent_hashing`, so an
image that kept PyPI's router (the fork's build skipped, or overwritten by a later install) fails here. The
gateway binary the fork builds must run too. No GPU, no server: argument parsing and one `--help`.
Usage: python probes/router_fork.py GATEWAY_BINARY
"""

from __future__ import annotations

import argparse
import subprocess
import sys

KEY_ROUTED = ("consistent_hashing", "manual")


def problems(gateway: str) -> list:
    from sglang_router.router import policy_from_str
    from sglang_router.router_args import RouterArgs

    found = []
    parser = argparse.ArgumentParser(exit_on_error=False)
    RouterArgs.add_cli_args(parser)
    for policy in KEY_ROUTED:
        try:
            parser.parse_args(["--policy", policy])
            policy_from_str(policy)
        except (argparse.ArgumentError, KeyError, SystemExit) as e:
            found.append(f"sglang_router does not take --policy {policy} (PyPI's router, not the fork?): {e}")
    try:
        run = subprocess.run([gateway, "--help"], capture_output=True, text=True, timeout=60)
        if run.returncode != 0:
            found.append(f"{gateway} --help exited {run.returncode}: {run.stderr.strip()[-300:]}")
    except OSError as e:
        found.append(f"{gateway}: {e.strerror}")
    return found


def main(argv: list) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    found = problems(argv[0])
    for line in found:
        print(line, file=sys.stderr)
    if not found:
        print("router: miles' fork (key-routed policies) and its gateway binary")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

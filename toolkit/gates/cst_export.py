"""Export a gate config as a container-structure-test (CST) config, for teams that already run that tool.

Decision: the exported file works against ANY image, including a pulled production image without /verify in it.

- Each gate kind exports its own checks (``verify/kinds``). Configured commands become a plain commandTest of
  their argv (``{python}`` replaced).
- Every other check (import, compile, signature, platform, pip check, provenance, the driver stub) becomes one
  commandTest that runs OUR runner on a one-check config shown in the test's args; an import's config carries the
  driver stub where the gate config declares one, so the import runs in the same fresh child, against the same
  stub and under the same namespace-package rule as in the build. The runner's modules travel inside the test as a
  base64 zip (about 45 kB) that a short bootstrap unpacks into a temp dir (the image's TMPDIR must be writable). So
  CST and ``python -m verify`` can never disagree about what a gate means. With ``runner_dir`` (the directory that
  contains ``verify/`` in the image) the bootstrap imports it from there instead and the blob is left out.

CST reads YAML, and YAML is a superset of JSON, so the file is written as JSON (checked with the real binary).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from toolkit.render import gate_bundle
from verify.config import from_dict
from verify.kinds import KINDS
from verify.kinds.imports import go_escape

SCHEMA_VERSION = "2.0.0"

_BOOT_EMBEDDED = (
    "import base64,io,os,sys,tempfile,zipfile\n"
    "d=tempfile.mkdtemp(prefix='verify-')\n"
    "zipfile.ZipFile(io.BytesIO(base64.b64decode('{blob}'))).extractall(d)\n"
    "sys.path.insert(0,d)\n"
    "c=os.path.join(d,'gates.json')\n"
    "open(c,'w').write(sys.argv[1])\n"
    "from verify.__main__ import main\n"
    "sys.exit(main(['--config',c]))\n"
)
_BOOT_IN_IMAGE = (
    "import os,sys,tempfile\n"
    "sys.path.insert(0,{runner_dir!r})\n"
    "fd,c=tempfile.mkstemp(prefix='verify-',suffix='.json')\n"
    "os.write(fd,sys.argv[1].encode()); os.close(fd)\n"
    "from verify.__main__ import main\n"
    "sys.exit(main(['--config',c]))\n"
)


def _runner_test(python: str, boot: str):
    """The commandTest that runs our runner on a one-check config (the default export of a gate kind)."""

    def test(name: str, kind: str, target: str, one_check: dict[str, Any]) -> dict:
        return {
            "name": name,
            "command": python,
            "args": ["-c", boot, json.dumps(one_check, sort_keys=True)],
            "exitCode": 0,
            "expectedOutput": ["(?m)^PASS +%s +%s " % (go_escape(kind), go_escape(target))],
            "excludedOutput": ["(?m)^FAIL "],
        }

    return test


def to_cst(config: dict[str, Any], python: str, runner_dir: str | None = None) -> dict[str, Any]:
    """The CST config (schemaVersion 2.0.0) for a gate config; raises ConfigError if ``config`` is invalid.
    Each gate kind exports its own checks (``Gate.cst_tests``), in the runner's order."""
    cfg = from_dict(config, "gate config")
    if runner_dir:
        boot = _BOOT_IN_IMAGE.format(runner_dir=runner_dir)
    else:
        boot = _BOOT_EMBEDDED.format(blob=base64.b64encode(gate_bundle.runner_zip()).decode("ascii"))
    runner_test = _runner_test(python, boot)
    tests: list[dict] = []
    for kind in KINDS:
        if kind.key in cfg:
            tests += kind.cst_tests(cfg[kind.key], python, runner_test, cfg)
    return {"schemaVersion": SCHEMA_VERSION, "commandTests": tests}


def write_cst(config: dict[str, Any], python: str, path: str, runner_dir: str | None = None) -> None:
    """Write to_cst(...) as JSON (CST parses it as YAML); an invalid config raises before the file is opened."""
    text = json.dumps(to_cst(config, python, runner_dir), indent=2) + "\n"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)

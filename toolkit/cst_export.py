"""Export a gate config as a container-structure-test (CST) config, for teams that already run that tool.

Decision: the exported file works against ANY image, including a pulled production image without /verify in it.

- Each import becomes a readable ``python -c "import X"`` commandTest (exit 0 and an ``imported X`` line).
- Each other gate (compile, signature, platform, pip check, provenance) becomes one commandTest that runs OUR
  runner on a one-check config shown in the test's args: the runner's modules travel inside the test as a base64
  zip (about 23 kB) that a short bootstrap unpacks into a temp dir (the image's TMPDIR must be writable). So CST
  and ``python -m verify`` can never disagree about what a gate means. With ``runner_dir`` (the directory that
  contains ``verify/`` in the image) the bootstrap imports it from there instead and the blob is left out.
- Each configured command becomes a plain commandTest of its argv (``{python}`` replaced).

CST reads YAML, and YAML is a superset of JSON, so the file is written as JSON (checked with the real binary).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from toolkit import gate_bundle
from verify.config import from_dict

SCHEMA_VERSION = "2.0.0"
_GO_SPECIAL = set("\\.+*?()|[]{}^$")

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


def _go_escape(text: str) -> str:
    """Escape for Go's RE2 (CST's regexps), which rejects Python's escapes of spaces and other non-punctuation."""
    return "".join("\\" + c if c in _GO_SPECIAL else c for c in text)


def _runner_test(name: str, kind: str, target: str, one_check: dict[str, Any], python: str, boot: str) -> dict:
    return {
        "name": name,
        "command": python,
        "args": ["-c", boot, json.dumps(one_check, sort_keys=True)],
        "exitCode": 0,
        "expectedOutput": ["(?m)^PASS +%s +%s " % (_go_escape(kind), _go_escape(target))],
        "excludedOutput": ["(?m)^FAIL "],
    }


def to_cst(config: dict[str, Any], python: str, runner_dir: str | None = None) -> dict[str, Any]:
    """The CST config (schemaVersion 2.0.0) for a gate config; raises ConfigError if ``config`` is invalid."""
    cfg = from_dict(config, "gate config")
    if runner_dir:
        boot = _BOOT_IN_IMAGE.format(runner_dir=runner_dir)
    else:
        boot = _BOOT_EMBEDDED.format(blob=base64.b64encode(gate_bundle.runner_zip()).decode("ascii"))
    tests: list[dict] = []
    for pkg, loc in cfg.provenance.items():
        tests.append(_runner_test("provenance %s" % pkg, "provenance", pkg, {"provenance": {pkg: loc}}, python, boot))
    for target in cfg.compile:
        tests.append(_runner_test("compile %s" % target, "compile", target, {"compile": [target]}, python, boot))
    for module in cfg.imports:
        tests.append(
            {
                "name": "import %s" % module,
                "command": python,
                "args": [
                    "-c",
                    "import importlib; importlib.import_module(%r); print('imported %s')" % (module, module),
                ],
                "exitCode": 0,
                "expectedOutput": ["(?m)^imported %s$" % _go_escape(module)],
            }
        )
    for sig in cfg.signatures:
        entry: dict[str, Any] = {"resolve" if sig.resolve else "target": sig.target, "import": sig.use_import}
        if sig.keywords is not None:
            entry["keywords"] = sig.keywords
        test = _runner_test("signature %s" % sig.target, "signature", sig.target, {"signatures": [entry]}, python, boot)
        if sig.resolve:  # the PASS line names the function the table resolved to, known only in the image
            test["expectedOutput"] = ["(?m)^PASS +signature "]
        tests.append(test)
    if cfg.platform:
        tests.append(
            _runner_test(
                "platform %s" % cfg.platform, "platform", cfg.platform, {"platform": cfg.platform}, python, boot
            )
        )
    if cfg.pip_check is not None:
        allow = [{"match": r.match, "reason": r.reason} for r in cfg.pip_check]
        test = _runner_test("pip check", "pip-check", "", {"pip_check": {"allow": allow}}, python, boot)
        test["expectedOutput"] = ["(?m)^PASS +pip-check "]
        tests.append(test)
    for cmd in cfg.commands:
        argv = [a.replace("{python}", python) for a in cmd.argv]
        tests.append({"name": "command %s" % cmd.name, "command": argv[0], "args": argv[1:], "exitCode": 0})
    return {"schemaVersion": SCHEMA_VERSION, "commandTests": tests}


def write_cst(config: dict[str, Any], python: str, path: str, runner_dir: str | None = None) -> None:
    """Write to_cst(...) as JSON (CST parses it as YAML); an invalid config raises before the file is opened."""
    text = json.dumps(to_cst(config, python, runner_dir), indent=2) + "\n"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)

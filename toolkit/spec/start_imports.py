"""A family's import gates derived from what miles imports on its start paths, not a hand list.

`ci/miles_start_imports.py` reads the miles tree at its pin and writes the modules miles' training driver, FSDP and
Megatron actors, rollout and router manager import (`images/miles-start-imports.json`, kept in step with the pin
by a test). A spec names that file under `gates.start_imports` and says, for each derived module that is not a
plain build import, where it goes instead and why:

    start_imports:
      file: images/miles-start-imports.json
      elsewhere:
        cutlass.cute: {gate: gpu_imports, why: "CuTe DSL binds the driver through cuda-python"}
        mlflow: {gate: none, why: "miles' optional tracking backend; its requirements do not install it"}

Every other derived module becomes an `imports` gate. `gate` is `gpu_imports` (run where a GPU is) or `none` (not
gated, with the reason). A module that loads the driver library at import needs no entry: where the family declares
the driver stub (`stub_imports: {stub: PATH}`), every import gate imports against it. An `elsewhere` entry the
derived list no longer names is refused, so a miles bump cannot leave a stale exception behind. The loader expands
this before the gate schema sees the config; the runner never knows the file exists.
"""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.errors import SpecError, short

ROOT = Path(__file__).resolve().parents[2]
ROUTES = ("gpu_imports", "none")
MAX_BYTES = 1 << 20


def derived(path: str, file: str, key: str) -> list[str]:
    """The gate list of a derived-imports file of the repository."""
    from toolkit.spec.catalog import check_repo_file

    check_repo_file(path, file, f"{key}.file")
    target = ROOT / path
    if target.stat().st_size > MAX_BYTES:
        raise SpecError(file, f"{key}.file", f"larger than {MAX_BYTES} bytes")
    try:
        data = json.loads(target.read_text())
        modules = data["gate"]
    except (ValueError, KeyError, TypeError):
        problem = "not a derived-imports file (ci/miles_start_imports.py writes them)"
        raise SpecError(file, f"{key}.file", problem) from None
    if not isinstance(modules, list) or not all(isinstance(m, str) for m in modules):
        raise SpecError(file, f"{key}.file", "its `gate` is not a list of module names")
    return modules


def expand(gates: dict, file: str, key: str) -> dict:
    """`gates` with `start_imports` replaced by the modules it derives, each in its gate."""
    spec = gates.get("start_imports")
    if spec is None:
        return gates
    if not isinstance(spec, dict) or not isinstance(spec.get("file"), str) or set(spec) - {"file", "elsewhere"}:
        raise SpecError(file, f"{key}.start_imports", "expected {file: PATH, elsewhere: {MODULE: {gate, why}}}")
    modules = derived(spec["file"], file, f"{key}.start_imports")
    elsewhere = spec.get("elsewhere") or {}
    if not isinstance(elsewhere, dict):
        raise SpecError(file, f"{key}.start_imports.elsewhere", "expected a mapping of modules")
    out = {k: v for k, v in gates.items() if k != "start_imports"}
    routed: dict[str, list] = {"imports": []}
    for name, rule in elsewhere.items():
        at = f"{key}.start_imports.elsewhere.{short(name, 60, quote=False)}"
        if name not in modules:
            raise SpecError(file, at, f"{spec['file']} no longer derives this module: remove the entry")
        if not isinstance(rule, dict) or rule.get("gate") not in ROUTES or not str(rule.get("why", "")).strip():
            raise SpecError(file, at, f"expected {{gate: {' | '.join(ROUTES)}, why: TEXT}}")
    for name in modules:
        gate = elsewhere[name]["gate"] if name in elsewhere else "imports"
        if gate != "none":
            routed.setdefault(gate, []).append(name)
    for gate, names in routed.items():
        have = list(out.get(gate) or [])
        out[gate] = have + [n for n in names if n not in have]
    return out

"""pip check: every requirement of every installed distribution is met, except conflicts an allow rule names.

An allow rule names the distribution and the requirement it excuses (``{"distribution": "sglang", "requirement":
"torch", "reason": ...}``), never a substring of the line: ``pip check`` prints three line shapes and a rule
matches only the two that name a requirement, for exactly that pair of names. ``parse`` proves it for each rule
against lines of every shape, so a rule that could excuse anything else never loads.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from ..result import CheckResult
from .base import Check, Gate, RunnerTest, config_error, short

if TYPE_CHECKING:
    from ..config import GateConfig

# The line shapes of `pip check` (pip/_internal/commands/check.py); anything else is never allowed.
SHAPES = (
    ("missing", re.compile(r"^(?P<dist>\S+) (?P<version>\S+) requires (?P<req>\S+), which is not installed\.?$")),
    (
        "version",
        re.compile(r"^(?P<dist>\S+) (?P<version>\S+) has requirement (?P<req>.+?), but you have \S+ \S+?\.?$"),
    ),
    ("platform", re.compile(r"^(?P<dist>\S+) (?P<version>\S+) is not supported on this platform$")),
)
_NAME_RE = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$")  # PEP 508 distribution names
_REQ_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")
RULE_KEYS = ("distribution", "requirement", "requirements", "reason")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class PipLine:
    """One line of `pip check`, parsed: its shape, the distribution and the requirement's name (None if none)."""

    text: str
    shape: Optional[str] = None
    dist: str = ""
    requirement: Optional[str] = None

    @classmethod
    def parse(cls, text: str) -> "PipLine":
        for shape, pattern in SHAPES:
            m = pattern.match(text)
            if m:
                req = m.groupdict().get("req")
                name = _REQ_NAME_RE.match(req) if req else None
                return cls(text, shape, canonical(m.group("dist")), canonical(name.group(0)) if name else None)
        return cls(text)


@dataclass
class AllowRule:
    """A known conflict that may stay: ``distribution``'s requirement(s) ``requirements`` (canonical names)."""

    distribution: str
    requirements: Tuple[str, ...]
    reason: str
    key: str = field(default="", compare=False)  # where the config says it: pip_check.allow[N]

    def matches(self, line: PipLine) -> bool:
        return (
            line.shape in ("missing", "version")
            and line.dist == canonical(self.distribution)
            and line.requirement in {canonical(r) for r in self.requirements}
        )

    def to_dict(self) -> Dict[str, Any]:
        names: Dict[str, Any] = (
            {"requirement": self.requirements[0]}
            if len(self.requirements) == 1
            else {"requirements": list(self.requirements)}
        )
        return dict({"distribution": self.distribution}, **names, reason=self.reason)


def counterexamples(rule: AllowRule) -> List[str]:
    """Lines of every shape the rule must not excuse but does, and lines it must excuse but does not (both empty
    for every rule ``parse`` accepts): the proof that a rule matches its own pair of names and nothing else."""
    dist, other = rule.distribution, "zz-other-dist"
    wrong = []
    for req in rule.requirements:
        own = ["%s 1.0 requires %s, which is not installed." % (dist, req)]
        own.append("%s 1.0 has requirement %s>=2, but you have %s 1.0." % (dist, req, req))
        others = [
            "%s 1.0 requires %s, which is not installed." % (other, req),
            "%s 1.0 requires %s, which is not installed." % (dist, other),
            "%s 1.0 has requirement %s==1, but you have %s 2.0." % (other, req, req),
            "%s 1.0 has requirement %s==1, but you have %s 2.0." % (dist, other, other),
            "%s 1.0 is not supported on this platform" % dist,
            "%s %s 1.0 unknown shape" % (dist, req),
        ]
        wrong += [ln for ln in own if not rule.matches(PipLine.parse(ln))]
        wrong += [ln for ln in others if rule.matches(PipLine.parse(ln))]
    return wrong


def _rule(entry: Any, where: str, key: str) -> AllowRule:
    if not isinstance(entry, dict):
        raise config_error(where, key, "must be an object {distribution, requirement, reason}")
    if "match" in entry:
        raise config_error(
            where,
            key + ".match",
            "is not accepted: a substring can match any pip check line; name the 'distribution' and the "
            "'requirement' it excuses",
        )
    unknown = sorted(set(entry) - set(RULE_KEYS))
    if unknown:
        raise config_error(where, "%s.%s" % (key, unknown[0]), "is not a known key (%s)" % ", ".join(RULE_KEYS))
    for part in ("distribution", "reason"):
        if not isinstance(entry.get(part), str) or not entry[part].strip():
            raise config_error(where, "%s.%s" % (key, part), "is required and must be a non-empty string")
    if ("requirement" in entry) == ("requirements" in entry):
        raise config_error(where, key, "names the requirement it excuses: 'requirement' or 'requirements', one")
    if "requirement" in entry:
        reqs, req_key = [entry["requirement"]], key + ".requirement"
    else:
        reqs, req_key = entry["requirements"], key + ".requirements"
        if not isinstance(reqs, list) or not reqs:
            raise config_error(where, req_key, "must be a non-empty list of distribution names")
    for name, value in [("distribution", entry["distribution"])] + [("requirement", r) for r in reqs]:
        if not isinstance(value, str) or not _NAME_RE.match(value):
            raise config_error(
                where,
                req_key if name == "requirement" else key + ".distribution",
                "must be a distribution name (PEP 508), got %r" % (value if not isinstance(value, str) else value[:40]),
            )
    rule = AllowRule(entry["distribution"], tuple(reqs), entry["reason"], key)
    wrong = counterexamples(rule)
    if wrong:  # cannot happen for names that passed the pattern; kept as the executable proof
        raise config_error(where, key, "would also excuse or miss %r" % wrong[0][:80])
    return rule


class PipRun:
    """A ``pip check`` started in the background (it is read-only, so it can overlap the in-process checks)."""

    def __init__(self, timeout: float = 600.0):
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PYTHONWARNINGS="ignore")
        self.timeout = timeout
        self.started = time.perf_counter()
        self.error: Optional[str] = None
        self.proc: Optional[subprocess.Popen] = None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "pip", "check"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                universal_newlines=True,
                errors="replace",
            )
        except OSError as exc:
            self.error = str(exc)

    def results(self, allow: List[AllowRule]) -> List[CheckResult]:
        """Wait for pip and judge its output: one result per conflict line; allowed lines pass, marked allowed."""
        results = self._judge(allow)
        seconds = (time.perf_counter() - self.started) / len(results)
        for res in results:
            res.seconds = seconds
        return results

    def _judge(self, allow: List[AllowRule]) -> List[CheckResult]:
        if self.proc is None:
            return [CheckResult("pip-check", "pip check", False, short(self.error or "pip did not start"))]
        try:
            left = self.timeout - (time.perf_counter() - self.started)
            stdout, stderr = self.proc.communicate(timeout=max(1.0, left))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return [CheckResult("pip-check", "pip check", False, "timed out after %gs" % self.timeout)]
        log = stdout + stderr
        lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("No broken requirements found")]
        if "No module named pip" in stderr:
            return [
                CheckResult("pip-check", "pip check", False, "pip is not installed for %s" % sys.executable, log=log)
            ]
        if not lines:
            if self.proc.returncode == 0:
                return [CheckResult("pip-check", "pip check", True, "No broken requirements found.", log=log)]
            last = (stderr.strip().splitlines() or ["(no output)"])[-1]
            return [
                CheckResult(
                    "pip-check", "pip check", False, short("exit %d: %s" % (self.proc.returncode, last)), log=log
                )
            ]
        results = []
        for text in lines:
            line = PipLine.parse(text)
            pkg = text.split()[0]
            rule = next((r for r in allow if r.matches(line)), None)
            if rule is not None:
                detail = short("allowed (%s): %s" % (rule.reason, text))
                by = {"line": text, "rule": rule.to_dict(), "config": rule.key, "reason": rule.reason}
                results.append(CheckResult("pip-check", pkg, True, detail, log=text, allowed=True, allowed_by=by))
            else:
                results.append(CheckResult("pip-check", pkg, False, short(text), log=log))
        return results


class PipCheck(Gate):
    key = "pip_check"
    kind = "pip-check"
    order = 60
    passes_when = (
        "each line of `python -m pip check` fails unless an allow rule names its distribution and the requirement "
        '(`requires X, which is not installed` or `has requirement X...`; then PASS, "allowed (reason)"); a line '
        "of any other shape always fails"
    )

    def parse(self, value: Any, where: str) -> List[List[AllowRule]]:
        """absent/null/false: no pip check; ``true``, ``{}`` or ``{"allow": [...]}``: one pip check."""
        if value is False:
            return []
        if value is True:
            return [[]]
        if not isinstance(value, dict) or set(value) - {"allow"}:
            raise config_error(where, self.key, 'must be null or an object {"allow": [...]}')
        allow = value.get("allow") or []
        if not isinstance(allow, list):
            raise config_error(where, "pip_check.allow", "must be a list of {distribution, requirement, reason}")
        rules = [_rule(entry, where, "pip_check.allow[%d]" % i) for i, entry in enumerate(allow)]
        seen: Dict[Tuple[str, str], int] = {}
        for i, rule in enumerate(rules):
            for req in rule.requirements:
                pair = (canonical(rule.distribution), canonical(req))
                if pair in seen:
                    raise config_error(
                        where, "pip_check.allow[%d]" % i, "repeats allow[%d] (%s, %s)" % (seen[pair], pair[0], pair[1])
                    )
                seen[pair] = i
        return [rules]

    def dump(self, items: List[List[AllowRule]]) -> Any:
        return {"allow": [rule.to_dict() for rule in items[0]]}

    def add_flags(self, parser: Any) -> None:
        parser.add_argument("--pip-check", action="store_true", help="pip check must be clean (config may allow lines)")

    def from_flags(self, args: Any) -> List[List[AllowRule]]:
        return [[]] if args.pip_check else []

    def merge(self, from_config: List[Any], from_flags: List[Any]) -> List[Any]:
        return from_config or from_flags  # one pip check; the config's allow rules stand

    def target(self, item: Any) -> str:
        return "pip check"

    def start(self, items: List[List[AllowRule]], cfg: "GateConfig") -> List[Check]:
        runs: List[Callable[[], List[CheckResult]]] = []
        for allow in items:
            run = PipRun()
            runs.append(lambda run=run, allow=allow: run.results(allow))  # type: ignore[misc]  # bound as defaults
        return list(runs)

    def cst_tests(
        self, items: List[Any], python: str, runner_test: RunnerTest, cfg: "GateConfig"
    ) -> List[Dict[str, Any]]:
        test = runner_test("pip check", self.kind, "", {self.key: self.dump(items)})
        test["expectedOutput"] = ["(?m)^PASS +pip-check "]
        return [test]

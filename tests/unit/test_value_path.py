"""A `--source` and a `--set` value, followed from the command line to the engine's build call: each module takes
the value from one place in the code, in the order of the flow, and none hands it back to build.py
(tests/value_path.py says what counts as taking it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import passing_report
from value_path import entries

import build
from toolkit.engine import builders, local_images
from toolkit.engine import docker_engine as engine
from toolkit.gates.report import NONCE_ARG

MARK = "VALUE_PATH_MARK"


@pytest.fixture
def engine_stand_in(monkeypatch):
    """The engine's answers, so the whole flow runs here: what reaches the build call is kept, nothing is built."""
    seen = []
    monkeypatch.setattr(engine, "connect", lambda host=None: "client")
    monkeypatch.setattr(engine, "buildx_cmd", lambda: ["docker", "buildx"])
    monkeypatch.setattr(builders, "resolve", lambda name, client=None: builders.Builder(None, "docker"))
    monkeypatch.setattr(local_images, "ensure", lambda client, variant, platforms, **kw: None)
    monkeypatch.setattr(engine, "tag_all", lambda client, image_id, refs: None)

    def build_call(plan, invocation, out=print, gate_steps=None, verbose=False):
        staged = Path(dict(invocation.contexts)["src-miles"])  # the scope removes it when the command ends
        seen.append((invocation, invocation.dockerfile.read_text(), (staged / "miles" / "__init__.py").is_file()))
        nonce = dict(invocation.build_args)[NONCE_ARG]
        gate_steps.append(("done", passing_report(plan.gates, nonce)))  # the gate step ran and proved it
        return "sha256:" + "0" * 64

    monkeypatch.setattr(engine, "build", build_call)
    return seen


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "value-path-tree"
    (root / "miles").mkdir(parents=True)
    (root / "miles" / "__init__.py").write_text("")
    return root


def follow(needle: str, tree) -> dict:
    argv = ["build", "--target", "miles-cpu", "--source", f"miles={tree}", "--set", f"env.{MARK}=on"]
    codes = []
    found = entries(lambda: codes.append(build.main(argv)), needle)
    assert codes == [0]
    return found


@pytest.mark.parametrize("needle", ["value-path-tree", MARK], ids=["source", "set"])
def test_the_value_enters_each_module_from_one_place_and_never_returns_to_build_py(needle, tree, engine_stand_in):
    found = follow(needle, tree)
    assert [place[0] for place in found["build.py"]] == [None], found["build.py"]  # only the caller enters it
    twice = {unit: places for unit, places in found.items() if len(places) > 1}
    assert not twice, twice
    assert list(found)[:3] == ["build.py", "toolkit/cli.py", "toolkit/request.py"]


def test_both_values_reach_the_dockerfile_and_the_build_call(tree, engine_stand_in):
    follow(MARK, tree)
    ((invocation, dockerfile, staged_tree_complete),) = engine_stand_in
    assert MARK in dockerfile
    assert staged_tree_complete and Path(dict(invocation.contexts)["src-miles"]) != tree

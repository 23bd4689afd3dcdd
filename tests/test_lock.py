"""`build.py lock` against real local servers: git repositories over HTTP and artifact files plus a releases API.

A family copied from images/smoke.yaml tracks a branch of a repository served on 127.0.0.1 and two artifacts.
The lock resolves them; a new commit pushed to the branch shows in `--check` (exit 1) and moves with
`--update`; every failure (a truncated download, a 404, a digest the release declares and the bytes miss, an
unreachable server, a branch that is not there) is one line with its exit code, and the lock stays byte-identical.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import yaml
from local_servers import ArtifactServer, GitServer, env_for
from support import ROOT, run_build_py

from toolkit.spec.catalog import load_family

FAMILY = "lockt"
WHEEL = b"a wheel's bytes\n" * 1000
ASSETS = {"x-1.0-py3-none-any.whl": b"x" * 4096, "y-2.0-py3-none-any.whl": b"y" * 100}


@pytest.fixture
def servers(tmp_path):
    g, a = GitServer(tmp_path / "git"), ArtifactServer()
    yield g, a
    g.stop()
    a.stop()


def write_family(project, components=None, artifacts=None, family=FAMILY):
    """images/lockt.yaml in the project copy: the smoke spec, renamed, with the given components and artifacts."""
    data = yaml.safe_load((ROOT / "images" / "smoke.yaml").read_text())
    data["family"], data["variants"] = family, {family: {"tag_suffix": family}}
    data["default"] = family
    data.pop("upstream_tags", None)  # its postfixes name the smoke variants
    if components:
        data["components"] = components
        data["steps"] = data["steps"] + [{"source": name} for name in components]  # each is installed by a step
    if artifacts:
        data["artifacts"] = artifacts
        data["steps"] = data["steps"] + [  # each file is installed by a step (a release is only recorded)
            {"artifact": name, "to": f"/opt/artifacts/{name}"} for name, a in artifacts.items() if "url" in a
        ]
    path = project / "images" / f"{family}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def lock(project, *args, api=None):
    return run_build_py("lock", "--family", FAMILY, *args, cwd=project, env=env_for(api), timeout=300)


def lock_json(project):
    return json.loads((project / "images" / f"{FAMILY}.lock.json").read_text())


def one_line(proc):
    return proc.stderr.count("\n") == 1 and proc.stderr.startswith("build.py: ")


def test_lock_resolves_a_branch_check_sees_a_push_and_update_moves_it(project_copy, servers):
    g, _ = servers
    url = g.create("o/demo")
    first = g.commit("o/demo", {"a.py": "A = 1\n"})
    spec = write_family(project_copy, {"demo": {"git": url, "track": {"branch": "main"}, "why": "the test's"}})
    proc = lock(project_copy)
    assert proc.returncode == 0, proc.stderr
    entry = lock_json(project_copy)["sources"]["demo"]
    assert entry == {"git": url, "policy": {"branch": "main"}, "commit": first, "via": "ls-remote"}
    assert f"| {FAMILY}/demo | (none)" in proc.stdout and first[:12] in proc.stdout
    assert load_family(spec)[FAMILY].components["demo"] == {"git": url, "ref": first}  # the pin, no policy text
    before = (project_copy / "images" / f"{FAMILY}.lock.json").read_bytes()

    second = g.commit("o/demo", {"a.py": "A = 2\n"})
    check = lock(project_copy, "--check")
    assert check.returncode == 1, check.stdout + check.stderr
    row = next(line for line in check.stdout.splitlines() if f"{FAMILY}/demo" in line)
    assert first[:12] in row and second[:12] in row and "| yes" in row
    assert lock(project_copy).returncode == 0  # an unchanged policy keeps its pin: a branch never moves by itself
    assert (project_copy / "images" / f"{FAMILY}.lock.json").read_bytes() == before

    moved = lock(project_copy, "--update", "demo")
    assert moved.returncode == 0, moved.stderr
    assert lock_json(project_copy)["sources"]["demo"]["commit"] == second
    assert lock(project_copy, "--check").returncode == 0

    # Without --family, every family that tracks something is locked; --update NAME moves NAME where it is tracked.
    # (The project's GPU families resolve their closures against the package index and upstream trees: not here.)
    (project_copy / "images" / "rocm.yaml").unlink()
    write_family(project_copy, {"other": {"git": url, "track": {"commit": first}}}, family="lockt2")
    assert run_build_py("lock", cwd=project_copy, env=env_for()).returncode == 0
    other = (project_copy / "images" / "lockt2.lock.json").read_bytes()
    third = g.commit("o/demo", {"a.py": "A = 3\n"})
    proc = run_build_py("lock", "--update", "demo", cwd=project_copy, env=env_for())
    assert proc.returncode == 0, proc.stderr
    assert lock_json(project_copy)["sources"]["demo"]["commit"] == third
    assert (project_copy / "images" / "lockt2.lock.json").read_bytes() == other


def test_a_tag_resolves_to_its_commit_and_a_fixed_commit_needs_no_remote(project_copy, servers):
    g, _ = servers
    url = g.create("o/rel")
    tagged = g.commit("o/rel", {"v": "1\n"}, tag="v1.0")  # annotated: ls-remote's peeled line is the commit
    g.commit("o/rel", {"v": "2\n"})
    components = {
        "rel": {"git": url, "track": {"tag": "v1.0"}},
        "fixed": {"git": "http://127.0.0.1:9/nowhere.git", "track": {"commit": "ab" * 20}},
    }
    write_family(project_copy, components)
    proc = lock(project_copy)
    assert proc.returncode == 0, proc.stderr
    sources = lock_json(project_copy)["sources"]
    assert sources["rel"]["commit"] == tagged
    assert sources["fixed"] == {
        "git": "http://127.0.0.1:9/nowhere.git",
        "policy": {"commit": "ab" * 20},
        "commit": "ab" * 20,
        "via": "spec",
    }


def test_artifact_digests_are_recorded_and_enter_labels_and_hash(project_copy, servers):
    _, a = servers
    wheel_url = a.file("w-1.0-py3-none-any.whl", WHEEL)
    a.release(
        "o/wheels",
        "cu130",
        ASSETS,
        digests={"x-1.0-py3-none-any.whl": "sha256:" + hashlib.sha256(ASSETS["x-1.0-py3-none-any.whl"]).hexdigest()},
    )
    artifacts = {
        "wheel": {"url": wheel_url, "why": "a prebuilt wheel"},
        "wheels": {"release": {"repo": "o/wheels", "tag": "cu130"}},
    }
    spec = write_family(project_copy, artifacts=artifacts)
    proc = lock(project_copy, api=a.api)
    assert proc.returncode == 0, proc.stderr
    data = lock_json(project_copy)["artifacts"]
    assert data["wheel"] == {
        "policy": {"url": wheel_url},
        "url": wheel_url,
        "size": len(WHEEL),
        "sha256": hashlib.sha256(WHEEL).hexdigest(),
    }
    assert sorted(data["wheels"]["assets"]) == sorted(ASSETS)
    for name, body in ASSETS.items():
        rec = data["wheels"]["assets"][name]
        assert rec["sha256"] == hashlib.sha256(body).hexdigest() and rec["size"] == len(body)

    from toolkit.plan.build_plan import make_plan
    from toolkit.render.context import build_labels, plan_hash, stage
    from toolkit.render.dockerfile import render

    def hashed():
        plan = make_plan(load_family(spec)[FAMILY], revision="r")
        text = render(plan)
        return plan_hash(plan, text), build_labels(plan, stage(plan, text, build_dir=project_copy / "build"))

    h1, labels = hashed()
    assert labels["io.miles.source.wheel"] == f"{wheel_url} sha256:{hashlib.sha256(WHEEL).hexdigest()}"
    assert labels["io.miles.source.wheels"].startswith("o/wheels@cu130 sha256:")
    a.file("w-1.0-py3-none-any.whl", WHEEL + b"replaced in place\n")
    check = lock(project_copy, "--check", api=a.api)
    assert check.returncode == 1 and "| yes" in next(x for x in check.stdout.splitlines() if "/wheel " in x)
    assert lock(project_copy, "--update", "wheel", api=a.api).returncode == 0
    assert hashed()[0] != h1


def test_an_artifact_never_locked_whose_host_does_not_answer_stays_pending(project_copy, servers):
    """A new artifact on a host that cannot be reached is left out of the lock (its step is then left out), the
    rest is locked; once locked, the same unreachable host fails the lock (the next test)."""
    g, a = servers
    url = g.create("o/demo")
    g.commit("o/demo", {"a.py": "A = 1\n"})
    artifacts = {"wheel": {"url": a.file("w.whl", WHEEL)}, "far": {"url": "http://127.0.0.1:9/far.bin"}}
    write_family(project_copy, {"demo": {"git": url, "track": {"branch": "main"}}}, artifacts)
    proc = lock(project_copy, api=a.api)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = lock_json(project_copy)
    assert "far" not in data["artifacts"] and "wheel" in data["artifacts"] and "demo" in data["sources"]
    assert "pending (its host did not answer)" in next(x for x in proc.stdout.splitlines() if f"{FAMILY}/far " in x)


@pytest.mark.parametrize(
    "case, code, words",
    [
        ("truncated", 3, "truncated download"),
        ("404", 2, "HTTP 404"),
        ("digest", 3, "digest mismatch"),
        ("unreachable-git", 3, "git ls-remote"),
        ("no-branch", 2, "no branch 'nope'"),
        ("unreachable-api", 3, "Connection refused"),
    ],
)
def test_a_failed_lock_is_one_line_and_leaves_the_lock_byte_identical(project_copy, servers, case, code, words):
    g, a = servers
    url = g.create("o/demo")
    wheel_url = a.file("w.whl", WHEEL)
    a.release("o/wheels", "cu130", ASSETS)
    artifacts = {"wheel": {"url": wheel_url}, "wheels": {"release": {"repo": "o/wheels", "tag": "cu130"}}}
    write_family(project_copy, {"demo": {"git": url, "track": {"branch": "main"}}}, artifacts)
    assert lock(project_copy, api=a.api).returncode == 0
    path = project_copy / "images" / f"{FAMILY}.lock.json"
    before = path.read_bytes()
    api = a.api
    if case == "truncated":
        a.file("w.whl", WHEEL, missing=512)
    elif case == "404":
        a.routes.pop("/files/w.whl")
    elif case == "digest":
        a.release("o/wheels", "cu130", ASSETS, digests={"y-2.0-py3-none-any.whl": "sha256:" + "0" * 64})
    elif case == "unreachable-git":
        g.stop()
    elif case == "no-branch":
        write_family(project_copy, {"demo": {"git": url, "track": {"branch": "nope"}}}, artifacts)
    elif case == "unreachable-api":
        a.stop()
    proc = lock(project_copy, "--update", api=api)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert one_line(proc) and words in proc.stderr, proc.stderr
    assert path.read_bytes() == before
    assert not [p.name for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp file left behind


def test_check_against_an_unreachable_server_prints_the_table_and_exits_3(project_copy, servers):
    g, _ = servers
    url = g.create("o/demo")
    write_family(project_copy, {"demo": {"git": url, "track": {"branch": "main"}}})
    assert lock(project_copy).returncode == 0
    before = (project_copy / "images" / f"{FAMILY}.lock.json").read_bytes()
    g.stop()
    proc = lock(project_copy, "--check")
    assert proc.returncode == 3 and one_line(proc), proc.stderr
    assert "| unreachable" in proc.stdout and "| source" in proc.stdout
    assert (project_copy / "images" / f"{FAMILY}.lock.json").read_bytes() == before


def test_from_release_lock_and_pin_record_commits_without_asking_the_remote(project_copy, tmp_path):
    c1, c2, c3 = "1" * 40, "2" * 40, "3" * 40
    components = {
        "sglang_miles": {
            "git": "http://127.0.0.1:9/sgl-project/sglang.git",
            "track": {"commit": c1, "branch": "sglang-miles"},
        },
        "megatron_lm": {"git": "http://127.0.0.1:9/radixark/Megatron-LM.git", "track": {"branch": "miles-main"}},
        "miles": {"git": "http://127.0.0.1:9/radixark/miles.git", "track": {"tag": "v0.1.0"}},
    }
    write_family(project_copy, components)
    release = {  # upstream's release-lock.json format
        "release_branch": "release/v0.1.0",
        "sglang_repo": "sgl-project/sglang",
        "sglang_branch": "sglang-miles",
        "megatron_repo": "radixark/Megatron-LM",
        "megatron_branch": "miles-main",
        "ci_image_tag": "release-v0.1.0-ci",
    }
    release.update(sglang_commit=c1, megatron_commit=c2)
    rl = tmp_path / "release-lock.json"
    rl.write_text(json.dumps(release))
    proc = lock(project_copy, "--from-release-lock", str(rl), "--pin", f"miles={c3}")
    assert proc.returncode == 0, proc.stderr
    sources = lock_json(project_copy)["sources"]
    assert (sources["sglang_miles"]["commit"], sources["sglang_miles"]["via"]) == (c1, "release-lock release-lock.json")
    assert (sources["megatron_lm"]["commit"], sources["megatron_lm"]["policy"]) == (c2, {"branch": "miles-main"})
    assert (sources["miles"]["commit"], sources["miles"]["via"]) == (c3, "pin")
    before = (project_copy / "images" / f"{FAMILY}.lock.json").read_bytes()
    again = lock(project_copy)  # a plain lock keeps every entry whose policy is unchanged, and how it was made
    assert again.returncode == 0 and "unchanged: images/lockt.lock.json" in again.stdout, again.stderr
    assert (project_copy / "images" / f"{FAMILY}.lock.json").read_bytes() == before
    release["sglang_commit"] = "4" * 40  # disagrees with the spec's fixed commit
    rl.write_text(json.dumps(release))
    bad = lock(project_copy, "--from-release-lock", str(rl), "--pin", f"miles={c3}")
    assert bad.returncode == 2 and one_line(bad) and "pins commit " + c1 in bad.stderr, bad.stderr
    release["megatron_commit"] = "not-a-commit"
    rl.write_text(json.dumps(release))
    bad = lock(project_copy, "--from-release-lock", str(rl))
    assert bad.returncode == 2 and one_line(bad) and "megatron_commit is not a 40-hex commit" in bad.stderr
    assert (project_copy / "images" / f"{FAMILY}.lock.json").read_bytes() == before


@pytest.mark.parametrize(
    "args, words",
    [
        (["--check", "--update"], "--check writes nothing"),
        (["--pin", "demo=abc"], "expected NAME=COMMIT"),
        (["--update", "nope"], "--update 'nope': no family here tracks a source of that name"),
        (["--family", "no-such"], "no such family"),
    ],
)
def test_bad_lock_options_exit_2_with_one_line(project_copy, args, words):
    write_family(project_copy, {"demo": {"git": "http://127.0.0.1:9/o/demo.git", "track": {"commit": "ab" * 20}}})
    proc = run_build_py(
        "lock", *(["--family", FAMILY] if "--family" not in args else []), *args, cwd=project_copy, env=env_for()
    )
    assert proc.returncode == 2 and one_line(proc) and words in proc.stderr, proc.stderr
    assert not (project_copy / "images" / f"{FAMILY}.lock.json").exists()


def test_the_repositorys_own_locks_check_prints_the_table_and_exits_3_when_github_is_unreachable():
    """GitHub's URLs are pointed at a closed local port (git's url.<base>.insteadOf), so the answer is the same on
    any host: every tracked source unreachable, the table printed, one line, exit 3, no lock touched."""
    env = env_for("http://127.0.0.1:9")
    env.update(
        GIT_CONFIG_COUNT="1",
        GIT_CONFIG_KEY_0="url.http://127.0.0.1:9/.insteadOf",
        GIT_CONFIG_VALUE_0="https://github.com/",
    )
    locks = {p: p.read_bytes() for p in (ROOT / "images").glob("*.lock.json")}
    if not locks:
        pytest.skip("no family declares a policy yet")
    proc = run_build_py("lock", "--check", env=env, timeout=300)
    assert proc.returncode == 3 and one_line(proc), proc.stdout + proc.stderr
    assert "| source" in proc.stdout and "unreachable" in proc.stdout
    assert {p: p.read_bytes() for p in locks} == locks

"""toolkit/progress.py: the heartbeat of a quiet build step, debootstrap's and pip download's streams condensed, all
driven by a fake clock (no engine, no subprocess)."""

import threading
import time

from toolkit.progress import BuildKitSteps, DebootstrapLines, Heartbeat, PipDownloadLines, ticking


class Clock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


STEP = "#12 [stage-0 7/21] RUN pip install --no-index -r /tmp/requirements.txt"


def _build(clock):
    out = []
    steps = BuildKitSteps(clock=clock)
    beat = Heartbeat(out.append, steps.describe, clock=clock)
    return out, steps, beat


def test_a_quiet_step_gets_a_heartbeat_after_10s_then_every_12s():
    clock = Clock()
    out, steps, beat = _build(clock)
    for line in ("#1 [internal] load build definition from Dockerfile", "#1 DONE 0.0s", STEP):
        steps.feed(line)
    beat.say("  [stage-0 6/21] RUN true    0.1s")
    clock.now += 9
    assert beat.tick() is None  # 9 s quiet: nothing yet
    clock.now += 2
    assert beat.tick() == "  … [stage-0 7/21] RUN pip install --no-index -r /tmp/requirements.txt still running (11 s)"
    for _ in range(11):
        clock.now += 1
        assert beat.tick() is None  # one line each 12 s, not one per tick
    clock.now += 1
    assert beat.tick().endswith("still running (23 s)")
    assert len(out) == 3  # the step line and two heartbeats
    steps.feed("#12 1.234 Collecting torch")  # the step's own output is not printed (not plain): still quiet
    clock.now += 12
    assert beat.tick().endswith("still running (35 s)")


def test_printing_resets_the_heartbeat_and_a_finished_step_is_not_named():
    clock = Clock()
    out, steps, beat = _build(clock)
    steps.feed(STEP)
    steps.feed("#13 [stage-1 2/5] RUN make")
    clock.now += 12
    assert beat.tick().endswith("RUN pip install --no-index -r /tmp/requirements.txt (and 1 more) still running (12 s)")
    steps.feed("#12 DONE 12.0s")
    beat.say("  [stage-0 7/21] RUN pip install ...   12.0s")
    clock.now += 5
    assert beat.tick() is None  # something was printed 5 s ago
    clock.now += 6
    assert beat.tick() == "  … [stage-1 2/5] RUN make still running (23 s)"
    steps.feed("#13 CACHED")
    clock.now += 60
    assert beat.tick() is None  # nothing named is running: nothing to say


def test_buildx_preamble_is_not_a_step_that_runs_for_ever():
    """`#0 building with ...` never gets a DONE line: taken for a step, it would be named once the last step ended."""
    clock = Clock()
    out, steps, beat = _build(clock)
    steps.feed('#0 building with "default" instance using docker driver')
    steps.feed(STEP)
    steps.feed("#12 DONE 1.0s")
    clock.now += 60
    assert beat.tick() is None


def test_buildkits_own_steps_are_named_only_when_no_other_runs():
    clock = Clock()
    out, steps, beat = _build(clock)
    steps.feed("#1 [internal] load metadata for docker.io/library/debian:bookworm")
    clock.now += 12
    assert beat.tick() == "  … [internal] load metadata for docker.io/library/debian:bookworm still running (12 s)"
    steps.feed(STEP)
    clock.now += 30
    assert beat.tick().startswith("  … [stage-0 7/21] RUN pip install")
    steps.feed("#1 DONE 40.0s")
    steps.feed("#12 DONE 30.0s")
    clock.now += 30
    assert beat.tick() is None and len(out) == 2  # nothing runs: nothing to name


def test_ticking_calls_tick_from_a_thread_and_stops_with_the_block():
    calls = []
    done = threading.Event()

    class Beat:
        def tick(self):
            calls.append(threading.current_thread().name)
            if len(calls) >= 3:
                done.set()

    with ticking(Beat(), interval=0.01):
        assert done.wait(5)
    stopped = len(calls)
    time.sleep(0.05)
    assert len(calls) == stopped and set(calls) == {"heartbeat"}
    assert not any(t.name == "heartbeat" for t in threading.enumerate())


DEBOOTSTRAP = [
    "I: Target architecture can be executed",
    "I: Retrieving InRelease ",
    "I: Checking Release signature",
    "I: Valid Release signature (key id 4D64FEC119C2029067D6E791F8D2585B8783D481)",
    "I: Retrieving Packages ",
    "I: Validating Packages ",
    "I: Resolving dependencies of required packages...",
    "I: Resolving dependencies of base packages...",
    "I: Checking component main on http://deb.debian.org/debian...",
] + [f"I: Retrieving pkg{i} 1.{i}" for i in range(80)] + [f"I: Validating pkg{i} 1.{i}" for i in range(80)] + [
    "I: Chosen extractor for .deb packages: dpkg-deb",
] + [f"I: Extracting pkg{i}..." for i in range(80)] + [
    "I: Installing core packages...",
] + [f"I: Unpacking pkg{i}..." for i in range(80)] + [
    "W: Failure trying to run: chroot /x mount -t proc proc /proc",
] + [f"I: Configuring pkg{i}..." for i in range(80)] + ["I: Base system installed successfully."]  # fmt: skip


def test_debootstrap_prints_one_line_per_stage_and_a_count_at_its_end():
    clock, out = Clock(), []
    lines = DebootstrapLines(out.append, clock=clock)
    for line in DEBOOTSTRAP:
        lines.feed(line + "\n")
        clock.now += 0.125  # 487 lines in 61 s
    lines.close()
    assert len(out) < 45, out
    assert "  debootstrap: I: Retrieving pkg0 1.0" in out
    assert "  debootstrap: Retrieving: 80 lines" in out
    assert "  debootstrap: Validating: 80 lines" in out
    assert "  debootstrap: Configuring: 80 lines" in out
    assert "  debootstrap: W: Failure trying to run: chroot /x mount -t proc proc /proc" in out
    assert out[-1] == "  debootstrap: I: Base system installed successfully."
    progress = [ln for ln in out if "Unpacking lines so far" in ln]
    assert progress and progress[0].startswith("  debootstrap: I: Unpacking pkg40...")  # one line each 5 s
    assert list(lines.tail)[-1] == "I: Base system installed successfully." and len(lines.tail) == 20


def test_debootstrap_describes_its_stage_for_the_heartbeat():
    clock, out = Clock(), []
    lines = DebootstrapLines(out.append, clock=clock)
    beat = Heartbeat(out.append, lines.describe, clock=clock)
    lines.feed("I: Installing core packages...")
    clock.now += 16
    assert beat.tick() == "  … debootstrap (Installing core packages...) still running (16 s)"


PIP = """\
Collecting torch==2.5.1 (from -r constraints.txt (line 3))
  Downloading torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl (906.4 MB)
Collecting numpy==2.1.0 (from -r constraints.txt (line 4))
  Using cached numpy-2.1.0-cp311-cp311-manylinux_2_17_x86_64.whl (16.3 MB)
Collecting six==1.16.0 (from -r constraints.txt (line 5))
  Downloading https://files.example/six-1.16.0-py2.py3-none-any.whl (11 kB)
Collecting tiny==1 (from -r constraints.txt (line 6))
  Downloading tiny-1-py3-none-any.whl (512 bytes)
Saved ./torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl
Successfully downloaded torch numpy six tiny
"""


def test_pip_download_is_one_line_per_file_at_most_every_few_seconds(tmp_path):
    clock, out = Clock(), []
    files = PipDownloadLines(out.append, total=5, clock=clock)
    for line in PIP.splitlines():
        files.feed(line + "\n")
        clock.now += 0.5
    assert out == ["  wheelhouse: 1/5 files, 906.4 MB (torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl)"]
    had = tmp_path / "old-1-py3-none-any.whl"
    had.write_bytes(b"x" * 2000)
    clock.now += 5
    files.feed(f"File was already downloaded {had}\n")
    assert out[-1] == "  wheelhouse: 5/5 files, 922.7 MB (old-1-py3-none-any.whl)"
    files.close()
    assert len(out) == 2  # the last count was shown already
    assert list(files.tail)[-1] == f"File was already downloaded {had}"


def test_pip_download_close_prints_the_last_count_and_describes_the_file():
    clock, out = Clock(), []
    files = PipDownloadLines(out.append, clock=clock)
    beat = Heartbeat(out.append, files.describe, clock=clock)
    files.feed("  Downloading a-1-py3-none-any.whl (2.0 MB)")
    files.feed("  Downloading big-1-py3-none-any.whl (1000.0 MB)")
    clock.now += 20
    assert beat.tick() == "  … wheelhouse: big-1-py3-none-any.whl still running (20 s)"
    files.close()
    assert out[-1] == "  wheelhouse: 2 files, 1.0 GB"


FAKE = """
import sys
for i in range(30):
    print("I: Retrieving pkg%d 1.0" % i, flush=True)
print("I: Validating pkg0 1.0", flush=True)
print("E: Couldn't download packages: pkg29", file=sys.stderr, flush=True)
sys.exit(1)
"""


def test_debootstrap_streams_condensed_and_a_failure_keeps_its_last_lines():
    import sys

    from toolkit.engine.base_image import debootstrap

    out = []
    run = debootstrap([sys.executable, "-c", FAKE], out.append)
    assert run.returncode == 1
    assert out == [
        "  debootstrap: I: Retrieving pkg0 1.0",
        "  debootstrap: Retrieving: 30 lines",
        "  debootstrap: I: Validating pkg0 1.0",
        "  debootstrap: E: Couldn't download packages: pkg29",
    ]
    tail = run.stdout.splitlines()
    assert (
        len(tail) == 20 and tail[-1] == "E: Couldn't download packages: pkg29" and tail[0] == "I: Retrieving pkg12 1.0"
    )


def test_the_wheelhouse_download_streams_one_line_per_file_and_keeps_the_error(tmp_path):
    import sys

    from toolkit.plan.wheelhouse import _line_count, _pip_download

    constraints = tmp_path / "constraints.txt"
    constraints.write_text("# pins\na==1\nb==2\n\n--index-url x\n")
    assert _line_count(constraints) == 2
    script = (
        "import sys\n"
        "print('Collecting a==1'); print('  Downloading a-1-py3-none-any.whl (2.0 MB)')\n"
        "print('ERROR: No matching distribution found for b==2', file=sys.stderr); sys.exit(1)\n"
    )
    out = []
    rc, tail = _pip_download([sys.executable, "-c", script], 2, out.append)
    assert rc == 1 and out == ["  wheelhouse: 1/2 files, 2.0 MB (a-1-py3-none-any.whl)"]
    assert tail[-1] == "ERROR: No matching distribution found for b==2"


def test_the_wheelhouse_asks_pip_for_lines_not_a_bar(tmp_path, monkeypatch):
    from toolkit.plan import wheelhouse

    seen = []
    monkeypatch.setattr(wheelhouse, "_pip_download", lambda cmd, total, log: (seen.append((cmd, total)), (0, []))[1])
    constraints = tmp_path / "c.txt"
    constraints.write_text("a==1\n")
    logged = []
    wheelhouse._download(["a==1"], "3.11", "manylinux_2_36_x86_64", constraints, tmp_path, logged.append,
                         wheelhouse.CACHE / "x")  # fmt: skip
    ((cmd, total),) = seen
    assert "--quiet" not in cmd and cmd[cmd.index("--progress-bar") + 1] == "off" and total == 1
    assert (tmp_path / ".complete").read_text() == "a==1\n" and logged[0].startswith("wheelhouse: downloading")


BUILDX = """
import sys, time
iid = sys.argv[sys.argv.index("--iidfile") + 1]
print("#1 [internal] load build definition from Dockerfile", flush=True)
print("#1 DONE 0.0s", flush=True)
print("#2 [stage-0 1/1] RUN sleep 1", flush=True)
time.sleep(1.0)
print("#2 DONE 1.0s", flush=True)
open(iid, "w").write("sha256:" + "a" * 64)
"""


def test_a_build_whose_step_is_quiet_prints_heartbeats_and_stops_them(monkeypatch):
    """toolkit/engine/docker_engine.py: build streams BuildKit's lines through the heartbeat, whose thread names the
    quiet step and ends with the build."""
    import sys
    from types import SimpleNamespace

    from toolkit import progress
    from toolkit.engine import docker_engine as engine

    monkeypatch.setattr(progress, "QUIET", 0.2)
    monkeypatch.setattr(progress, "EVERY", 0.3)
    monkeypatch.setattr(progress, "TICK", 0.02)
    monkeypatch.setattr(engine, "buildx_cmd", lambda: [sys.executable, "-c", BUILDX])
    invocation = SimpleNamespace(secrets=(), site=engine.BuildSite(), argv=lambda buildx, files: [*buildx, *files])
    plan = SimpleNamespace(name="t", progress="auto", variant=SimpleNamespace(artifacts={}))
    out = []
    assert engine.build(plan, invocation, out=out.append) == "sha256:" + "a" * 64
    beats = [ln for ln in out if ln.startswith("  … ")]
    assert 1 <= len(beats) <= 4, out
    assert all(ln.startswith("  … [stage-0 1/1] RUN sleep 1 still running (") for ln in beats)
    assert out.index(beats[-1]) < next(i for i, ln in enumerate(out) if "[stage-0 1/1] RUN sleep 1 " in ln
                                        and not ln.startswith("  … "))  # fmt: skip
    assert out[-1].startswith("built t in ") and not any(t.name == "heartbeat" for t in threading.enumerate())

"""Run a compile with its parallelism sized to the machine that runs the step (a build step runs this with the
image's python, around its pip).

    python jobs.py --gib-per-job G [--cpus-per-job C] [--parallel-env NAME --parallel-max P] -- COMMAND [ARG]...

The step's job budget is the smaller of the CPUs it may use divided by C (CPUs one compiler job keeps busy, e.g.
nvcc's --threads) and the memory available now divided by G (one job's peak, as the spec records it for that
kernel), at least 1. A build arg MAX_JOBS that is set (`--set args.MAX_JOBS=N`) is the budget instead. With
`--parallel-env`, the budget is shared between that many extensions built at once (at most P) and the jobs of
each: NAME=parallel, MAX_JOBS=budget // parallel. Otherwise MAX_JOBS=budget. COMMAND then runs (exec) with those
in its environment, and one line on stderr says what was chosen and why.

It runs inside the build, on the BuildKit worker that runs the step, so the Dockerfile text, BuildKit's cache key
and the input hash never depend on the host: two builders of different sizes build the same layers, each with
jobs that fit it. CPUs: the scheduler affinity (cpuset), bounded by a cgroup CPU quota. Memory: MemAvailable of
/proc/meminfo, bounded by the cgroup's limit less its usage where the step's cgroup shows one.
Standard library only, Python 3.6 and later: it runs with whatever python the base image has.
"""

import argparse
import os
import sys

GIB = 1024**3
JOBS = "MAX_JOBS"
MAX_GIVEN = 4096  # the largest budget a set MAX_JOBS may give (toolkit/steps/base.py: MAX_JOBS_GIVEN)


def read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def cpu_count():
    """CPUs this process may run on: its affinity, bounded by a cgroup v2 (cpu.max) or v1 (cfs) quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    quota = None
    v2 = read("/sys/fs/cgroup/cpu.max")
    if v2 and not v2.startswith("max"):
        fields = v2.split()
        if len(fields) == 2:
            quota = (int(fields[0]), int(fields[1]))
    else:
        q, p = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
        if q and p and int(q) > 0 and int(p) > 0:
            quota = (int(q), int(p))
    if quota and quota[1] > 0:
        cpus = min(cpus, max(1, -(-quota[0] // quota[1])))
    return max(1, cpus)


def meminfo_available(text):
    """MemAvailable of a /proc/meminfo text, in bytes (MemFree on a kernel too old to say), or None."""
    fields = {}
    for line in (text or "").splitlines():
        name, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            fields[name.strip()] = int(words[0]) * 1024
    return fields.get("MemAvailable", fields.get("MemFree"))


def available_bytes():
    """Memory available now: MemAvailable, bounded by the cgroup limit less usage (v2, then v1)."""
    avail = meminfo_available(read("/proc/meminfo"))
    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        limit, usage = read(limit_file), read(usage_file)
        if limit and limit.isdigit() and usage and usage.isdigit() and int(limit) < (1 << 60):
            room = max(0, int(limit) - int(usage))
            avail = room if avail is None else min(avail, room)
            break
    return avail


def given_jobs(value):
    """MAX_JOBS as the build arg gives it: None when unset or empty, else a whole number from 1 to MAX_GIVEN in
    ASCII digits (ValueError), as the toolkit checks it (toolkit/steps/base.py)."""
    if value is None or value == "":
        return None
    if not (len(value) <= 4 and value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_GIVEN:
        raise ValueError(
            "MAX_JOBS=%r: a whole number from 1 to %d, or empty to size the jobs to the machine"
            % (value[:40], MAX_GIVEN)
        )
    return int(value)


def choose(cpus, avail, gib_per_job, cpus_per_job=1, parallel_max=None, given=None):
    """(jobs, parallel or None, why): the step's budget and how it is shared. `avail` in bytes (None: unknown)."""
    if given is not None:
        budget, why = given, "MAX_JOBS=%d given" % given
    else:
        by_cpu = max(1, cpus // cpus_per_job)
        by_mem = by_cpu if avail is None else max(1, int(avail // (gib_per_job * GIB)))
        budget = min(by_cpu, by_mem)
        mem = "memory unknown" if avail is None else "%.1f GiB available" % (avail / GIB)
        bound = "memory" if by_mem < by_cpu else "CPUs"
        why = "%d CPUs at %d a job, %s at %s GiB a job: the %s bound" % (
            cpus,
            cpus_per_job,
            mem,
            gib_per_job,
            bound,
        )
    if not parallel_max:
        return budget, None, why
    parallel = max(1, min(parallel_max, budget))
    return max(1, budget // parallel), parallel, why


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("jobs.py: usage: jobs.py OPTIONS -- COMMAND [ARG]...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="jobs.py", description=__doc__.splitlines()[0])
    p.add_argument("--gib-per-job", type=float, required=True)
    p.add_argument("--cpus-per-job", type=int, default=1)
    p.add_argument("--parallel-env")
    p.add_argument("--parallel-max", type=int)
    args = p.parse_args(argv[:cut])
    command = argv[cut + 1 :]
    if (
        not command
        or args.gib_per_job <= 0
        or args.cpus_per_job < 1
        or bool(args.parallel_env) != bool(args.parallel_max)
    ):
        print(
            "jobs.py: a command, a positive --gib-per-job and --cpus-per-job, and --parallel-env with "
            "--parallel-max, or neither",
            file=sys.stderr,
        )
        return 2
    try:
        given = given_jobs(os.environ.get(JOBS))
    except ValueError as e:
        print("jobs.py: %s" % e, file=sys.stderr)
        return 2
    jobs, parallel, why = choose(
        cpu_count(), available_bytes(), args.gib_per_job, args.cpus_per_job, args.parallel_max, given
    )
    env = dict(os.environ, **{JOBS: str(jobs)})
    chosen = "%s=%d" % (JOBS, jobs)
    if parallel is not None:
        env[args.parallel_env] = str(parallel)
        chosen += " %s=%d" % (args.parallel_env, parallel)
    print("jobs.py: %s (%s)" % (chosen, why), file=sys.stderr, flush=True)
    os.execvpe(command[0], command, env)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())

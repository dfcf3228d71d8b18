"""The entry point: ``Grader().grade(lab, code) -> Verdict``.

The worker that drains the submission queue holds one Grader (and so one warm
pool) for its lifetime and calls ``grade`` once per submission. The student's
code is never imported here: it is parsed (``compile``, which runs nothing) to
report syntax errors with their line, then run only inside a sandbox.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from labs.host import cgroups, judge, pidns, sandbox, seccomp, template, uids
from labs.host.feedback import NPROC, OUTPUT_BYTES, summarise
from labs.host.groups import (
    adopt_sandbox,
    arm,
    late_faults,
    lease_uids,
    measure,
    pack_inputs,
    place_ranks,
    plan,
    rank_data,
    record,
    seen,
    send_inputs,
    wire_pictures,
)
from labs.host.judge import Facts, GroupRun
from labs.host.pool import WarmPool
from labs.host.prove import reference_wire
from labs.spec import DEFAULT_CONTENT, Lab, LabError, load_lab, load_labs
from labs.verdict import CheckResult, Status, Verdict, points_share, total_points

MAX_CODE = 256 * 1024  # the submission API refuses larger code with 413
# With control groups a rank's tasks are capped by its group (NPROC); RLIMIT_NPROC, counted per uid
# (and uids are leased per job, labs.host.uids), stays as a backstop well above it.
NPROC_BACKSTOP = 4 * NPROC
ALLOW_NO_CGROUPS_ENV = "RINGLAB_ALLOW_NO_CGROUPS"
SWITCH_INTERVAL_S = 0.0005
FAULT_ATTEMPTS = 3  # runs of a job whose planned crash landed late on a loaded machine, the last one judged


class Grader:
    """Grades submissions for the labs under ``content_dir``.

    ``preload`` (default: every ``preload`` of the labs under ``content_dir``) are the modules the
    warm template imports once, so no rank pays for a lazy import; a lab loaded later that needs more
    restarts the template with them, and with all ``preload_source()`` names then.
    ``pool_size`` sandboxes are kept ready (0: start one per submission). ``fork_from_template``
    (default: where possible, as root) starts each sandbox's zygote by forking a torch-warm
    template into it (``labs.host.template``, ~40 ms) instead of importing torch in it (~1.2 s of a core).
    ``unsafe_no_sandbox`` runs ranks without bubblewrap: development only.

    Each job and each rank runs in control groups of its own (``labs.host.cgroups``: memory, shared
    memory included, and tasks). Where they cannot be used the Grader refuses every submission,
    unless ``allow_without_cgroups`` (default: the environment variable ``RINGLAB_ALLOW_NO_CGROUPS=1``;
    implied by ``unsafe_no_sandbox``), when rlimits alone bound the ranks. ``confinement`` says
    which is in force: ``"cgroup v1"``, ``"cgroup v2"`` or ``"none"``.
    """

    def __init__(
        self,
        content_dir: Path = DEFAULT_CONTENT,
        *,
        pool_size: int = 1,
        gpus: bool = False,
        unsafe_no_sandbox: bool = False,
        fork_from_template: bool | None = None,
        preload: list[str] | None = None,
        preload_source: Callable[[], list[str]] | None = None,
        allow_without_cgroups: bool | None = None,
    ):
        self.content_dir = Path(content_dir)
        self.unsafe = unsafe_no_sandbox
        self.gpus = gpus
        self.refusal = None if unsafe_no_sandbox else sandbox.probe()
        self.cgroups: cgroups.Cgroups | None = None
        if not self.unsafe and self.refusal is None:
            try:
                self.cgroups = cgroups.Cgroups.open()
            except cgroups.CgroupError as exc:
                if allow_without_cgroups is None:
                    allow_without_cgroups = os.environ.get(ALLOW_NO_CGROUPS_ENV, "") == "1"
                if not allow_without_cgroups:
                    self.refusal = no_cgroups(str(exc))
        self.confinement = self.cgroups.mode if self.cgroups is not None else "none"
        if fork_from_template is None:
            fork_from_template = template.available()
        use = fork_from_template and not self.unsafe and self.refusal is None
        modules = preload if preload is not None else preloads(self.content_dir)
        self.preload_source = preload_source
        self.template = template.Template(preload=modules) if use else None
        self.pool = (
            WarmPool(pool_size, unsafe=self.unsafe, gpu=gpus, template=self.template)
            if pool_size and self.refusal is None
            else None
        )
        self.labs: dict[Path, tuple[Lab, ModuleType]] = {}  # by folder: one per lab version
        self.reaping: list[threading.Thread] = []  # finished jobs being cleaned up (``_reap``)
        self.reaping_lock = threading.Lock()
        self.jobs = 0
        # A thread computing a lab's references (judge.later) holds the GIL for up to the switch interval each
        # time the grading loop wants it back to answer the sandbox: 0.5 ms instead of Python's 5 ms (interleaved,
        # 8 gradings each: activation-checkpointing 1.109 -> 1.049 s, tp-attention 1.110 -> 1.058 s).
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        if self.template is not None:
            self.template.close()
        self.settle()
        if self.cgroups is not None:
            self.cgroups.close()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lab(self, lab_id: str, lab_dir: Path | None = None) -> tuple[Lab, ModuleType]:
        """The lab and its checks module, from ``lab_dir`` (a folder per lab version) or the content folder."""
        folder = Path(lab_dir) if lab_dir is not None else self.content_dir / lab_id
        if folder not in self.labs:
            self.labs[folder] = self.load_checks(folder)
            self._cover(self.labs[folder][0].spec.preload)
        return self.labs[folder]

    def _cover(self, modules: list[str]) -> None:
        """Have the template import a lab's ``preload`` (and, when it lacks some, every module the
        ``preload_source`` names now: one restart for all the labs published since it started)."""
        if self.template is None or self.template.covers(modules):
            return
        everything = self.preload_source() if self.preload_source is not None else []
        self.template.cover([*modules, *everything])

    @staticmethod
    def load_checks(folder: Path) -> tuple[Lab, ModuleType]:
        """A lab folder's metadata and its trusted ``checks.py``, imported under a name of its own."""
        lab = load_lab(folder)
        spec = importlib.util.spec_from_file_location(f"ringlab_checks_{lab.id.replace('-', '_')}", lab.checks_path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return lab, module

    def grade(
        self,
        lab_id: str,
        code: str,
        *,
        world_sizes: list[int] | None = None,
        backend: str | None = None,
        time_limit_s: float | None = None,
        seed: int | None = None,
        lab_dir: Path | None = None,
    ) -> Verdict:
        """Run ``code`` against every check of the lab and say how it did. Never raises for bad code.

        ``world_sizes`` and ``backend`` default to the lab's; ``backend="nccl"`` runs one GPU per rank
        and needs a Grader made with ``gpus=True`` on a worker with enough GPUs. ``lab_dir`` grades
        against that folder (one lab version) instead of the content folder's copy of the lab.
        """
        started = time.monotonic()
        lab, checks = self.lab(lab_id, lab_dir)
        spec = lab.spec
        backend = backend or spec.backends[0]
        sizes = world_sizes or spec.world_sizes
        verdict = self._precheck(lab, code) or self._check_backend(lab, backend, max(sizes))
        if verdict is None:
            seed = seed if seed is not None else secrets.randbits(62)
            limits = {
                "wall_s": time_limit_s or spec.time_limit_s,
                "cpu_s": int((time_limit_s or spec.time_limit_s) + 1),
                "memory_mb": spec.memory_limit_mb,
                "gpu_memory_mb": spec.gpu_memory_mb,
                "nproc": NPROC if self.cgroups is None else NPROC_BACKSTOP,
                "nofile": 128,
                "fsize": 16 << 20,
                "output_bytes": OUTPUT_BYTES,
            }
            try:
                for _ in range(FAULT_ATTEMPTS):  # again, with the same inputs, while a planned crash landed late
                    groups = plan(checks, sizes, seed)
                    run = self._run(code, groups, limits, backend, lab)
                    if not late_faults(groups):
                        break
            except sandbox.SandboxError as exc:
                verdict = self._verdict(lab, "refused", f"the sandbox could not be set up: {exc}", [])
            else:
                verdict = self._judge(lab, checks, groups, run)
        verdict.elapsed_s = round(time.monotonic() - started, 3)
        return verdict

    def _verdict(self, lab: Lab, status: Status, message: str, checks: list[CheckResult]) -> Verdict:
        if not checks:
            checks = [CheckResult(c.id, c.title, c.points, False, 0, "not run") for c in lab.spec.checks]
        score = total_points(c.score for c in checks)
        return Verdict(lab.id, status, score, lab.spec.max_score, message, checks)

    def _precheck(self, lab: Lab, code: str) -> Verdict | None:
        if self.refusal is not None:
            return self._verdict(lab, "refused", f"grading is unavailable: {self.refusal}", [])
        if len(code) > MAX_CODE:
            return self._verdict(lab, "compile_error", f"the submission is longer than {MAX_CODE} characters", [])
        if "\0" in code:  # compile() would say "line None"
            line = code.count("\n", 0, code.index("\0")) + 1
            message = f"the file contains a NUL byte (line {line}); save it as plain UTF-8 text without NUL bytes"
            return self._verdict(lab, "compile_error", message, [])
        try:
            compile(code, judge_source_name(), "exec", dont_inherit=True)
        except SyntaxError as exc:
            where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
            return self._verdict(lab, "compile_error", f"{type(exc).__name__} at {where}: {exc.msg}", [])
        except ValueError as exc:  # null bytes
            return self._verdict(lab, "compile_error", f"the submission cannot be compiled: {exc}", [])
        # A speed bump only: no guarantee depends on it (docs/reference/architecture.md, "The pre-check").
        from labs.spec import precheck

        refused = precheck.refusal(code, public_files=lab.spec.public_files, allow=lab.spec.precheck.allow)
        if refused is not None:
            return self._verdict(lab, "not_allowed", refused, [])
        return None

    def _acquire(self) -> sandbox.Sandbox:
        if self.pool is not None:
            return self.pool.acquire()
        box = sandbox.Sandbox(unsafe=self.unsafe, gpu=self.gpus, template=self.template)
        box.wait_ready()
        return box

    def _check_backend(self, lab: Lab, backend: str, world_size: int) -> Verdict | None:
        if backend not in lab.spec.backends:
            return self._verdict(lab, "refused", f"lab {lab.id} does not run on backend {backend!r}", [])
        if backend != "nccl":
            return None
        have = gpu_count()
        if not self.gpus or have < world_size:
            why = "this grader was started without GPU access" if not self.gpus else f"it has {have}"
            return self._verdict(lab, "refused", f"nccl needs {world_size} GPU(s), one per rank: {why}", [])
        return None

    def _run(self, code: str, groups: list[GroupRun], limits: dict[str, Any], backend: str, lab: Lab) -> dict[str, Any]:
        """Send the job to a fresh sandbox and collect its messages into ``groups``."""
        box = self._acquire()
        box.promote()
        self.jobs += 1
        job = {
            "code": code,
            "limits": limits,
            "sandboxed": box.sandboxed,
            "seccomp": seccomp.program_b64(gpu=backend == "nccl") if box.sandboxed else None,
            "backend": backend,
            "public": lab.public_sources(),
            "preload": lab.spec.preload,
            "entry": lab.spec.entry,
            "groups": [
                {
                    "world_size": g.world_size,
                    "phase": g.phase,
                    "expect_crash": g.expect_crash,
                    "shares_dir": g.shares_dir,
                    "fault_plan": g.fault is not None,  # only that one follows the inputs: the plan never enters a rank
                    "calls": [
                        {"fn": c.fn, "inplace": c.inplace, "measure": c.measure, "driver": c.driver} for c in g.cases
                    ],
                }
                for g in groups
            ],
        }
        end: dict[str, Any] = {"kind": None}
        lease: uids.UidLease | None = None
        job_groups: cgroups.JobCgroups | None = None
        zygote: int | None = None
        current: int | None = None  # the group whose ranks were last started
        namespace = pidns.sandbox_namespace(box.proc.pid) if box.sandboxed else None
        try:
            lease = lease_uids()
            if self.cgroups is not None and box.sandboxed:
                if namespace is None:
                    raise sandbox.SandboxError("the sandbox's pid namespace was not found")
                job_groups = self.cgroups.job(
                    ranks=max(g.world_size for g in groups), memory_mb=int(limits["memory_mb"]), pids_per_rank=NPROC
                )
            deadline = time.monotonic() + float(limits["wall_s"]) + 10.0
            box.send({"kind": "job", **job, "uid_base": lease.base})
            pack_inputs(groups)  # while the zygote starts the first group's store and ranks
            while True:
                got = box.receive(deadline)
                if got is None:
                    end = {"kind": "lost", "detail": box.error_output()[-2000:]}
                    break
                meta, payload = got
                kind = meta.get("kind")
                if kind in ("end", "fault"):
                    end = meta
                    break
                if kind == "need_inputs":
                    g = current = int(meta["group"])
                    if "pids" in meta and job_groups is not None and namespace is not None:
                        if zygote is None:  # with the first ranks (one stall of the kernel's cgroup lock, not two)
                            zygote = adopt_sandbox(job_groups, namespace, box, meta["pids"])
                        place_ranks(job_groups, namespace, g, meta["pids"], zygote)  # before student code runs
                    send_inputs(box, groups[g], per_call="pids" in meta)
                    if groups[g].fault is not None:  # after the fork: held by the zygote alone (labs/rank/faults.py)
                        box.send({"kind": "fault_plan", "group": g, "plan": groups[g].fault})
                    continue
                if kind == "ranks_ready":  # every rank joined its group; no student code has run yet
                    g = int(meta["group"])
                    if job_groups is not None:
                        arm(job_groups, groups[g])
                    box.send({"kind": "go", "group": g})
                    continue
                if kind == "group_end" and job_groups is not None:  # the kernel's facts before anything else
                    measure(job_groups, groups[int(meta["group"])], meta)
                record(groups, meta, payload)
        except TimeoutError:
            end = {"kind": "lost", "detail": "the sandbox stopped answering"}
        except OSError as exc:
            end = {"kind": "lost", "detail": f"the sandbox connection failed: {exc}"}
        except cgroups.CgroupError as exc:  # before any student code ran: nothing was graded
            raise sandbox.SandboxError(str(exc)) from exc
        finally:
            if end.get("kind") == "lost" and job_groups is not None and current is not None:
                # No group_end came: what the kernel saw of the group in flight (a fork refused at the
                # process limit, an OOM kill) still says why the sandbox stopped answering.
                with contextlib.suppress(OSError, cgroups.CgroupError):
                    measure(job_groups, groups[current], {})
            box.kill()
            self._reap(job_groups, namespace if zygote is None else None, lease)  # adopted: its groups say when
        return end

    def _reap(
        self, job_groups: cgroups.JobCgroups | None, namespace: tuple[int, int] | None, lease: uids.UidLease | None
    ) -> None:
        """In the background (the verdict needs none of it): wait for every process of the killed sandbox to
        be gone, remove the job's groups, and only then give its uids back for another job."""

        def reap() -> None:
            try:
                if job_groups is not None:
                    job_groups.close()
                if namespace is not None:  # a sandbox never in the job's group (it ended before its first ranks)
                    pidns.wait_empty(namespace)
            finally:
                if lease is not None:
                    lease.release()

        thread = threading.Thread(target=reap, name="labs-reap", daemon=True)
        with self.reaping_lock:
            self.reaping = [t for t in self.reaping if t.is_alive()] + [thread]
        thread.start()

    def settle(self, timeout: float = 60.0) -> None:
        """Wait until every finished job's processes and control groups are gone."""
        with self.reaping_lock:
            threads = list(self.reaping)
        for thread in threads:
            thread.join(timeout)

    def _judge(self, lab: Lab, checks: ModuleType, groups: list[GroupRun], end: dict[str, Any]) -> Verdict:
        judge.settle([case for group in groups for case in group.cases])
        facts = Facts(groups)
        rules: dict[str, judge.Rule] = getattr(checks, "RULES", {})
        results = []
        for c in lab.spec.checks:
            outcome = rules[c.id](facts) if c.id in rules else judge.correctness(facts, c.id)
            results.append(
                CheckResult(
                    c.id, c.title, c.points, outcome.passed, points(c.points, outcome), outcome.message, outcome.data
                )
            )
        status, message = summarise(groups, end, results)
        verdict = self._verdict(lab, status, message, results)
        verdict.output = {
            f"ws{g.world_size}/rank{r}": run.info.get("output", "")
            for g in groups
            for r, run in enumerate(g.ranks)
            if run.info.get("output")
        }
        verdict.data = {
            # A group in flight when the sandbox stopped answering has no status, but what the kernel saw of it
            # (a fork refused at the limit, an OOM kill) is why.
            "ranks": {f"ws{g.world_size}": [rank_data(run) for run in g.ranks] for g in groups if g.status or seen(g)},
            "wire": wire_pictures(groups),
        }
        reference = reference_wire(lab)
        if reference:
            verdict.data["reference_wire"] = reference
        return verdict


def no_cgroups(reason: str) -> str:
    """Why a worker without control groups refuses untrusted code, and what to do about it."""
    return (
        f"control groups cannot be used here ({reason}), so a rank's memory (shared memory included) and its "
        "processes could not be limited or measured. Run the worker as root on a host with cgroup v1 (memory and "
        f"pids controllers) or cgroup v2, or set {ALLOW_NO_CGROUPS_ENV}=1 (ringlab worker --allow-no-cgroups) to "
        "grade with rlimits alone, which does not contain shared memory: not for untrusted code"
    )


def points(available: int, outcome: judge.Outcome) -> float:
    """Full points for a check that holds; for one that holds in part, its share of them, to one decimal.

    Statements promise "the share of cases that are right": 2 of 5 right earns 0.8 of 2 points
    (rounding down to whole points gave 0). A share just short of whole is never rounded up to full
    marks: 0.99 of 2 points is 1.9, not 2.0 (``verdict.points_share``).
    """
    if outcome.passed:
        return available
    return points_share(available, outcome.fraction or 0.0)


def preloads(content_dir: Path) -> list[str]:
    """Every module some lab asks the warm template to import."""
    try:
        labs = load_labs(content_dir)
    except (LabError, OSError):
        return []
    return sorted({m for lab in labs.values() for m in lab.spec.preload})


def judge_source_name() -> str:
    return "submission.py"


def gpu_count() -> int:
    """CUDA GPUs this process can use (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0

"""The embedded runner: a plan's steps as local subprocesses, no cluster needed.

It is an *executor* of the engine's decider (planops.engine.Run), exactly as the reconciler is:
it asks what to start, starts it, and reports results back. No scheduling rule lives here.

- shell: the step's words (shlex) as a subprocess, first word looked up on PATH, never a shell.
- script: its interpreter (looked up on PATH) given the script as one argument (`sh -c SCRIPT`),
  as in a pod (engine.step_grants); its env values as rendered, a value from a Secret or
  ConfigMap and a volume refused (runners.podlike): a laptop has neither.
- tool: the tool's `command`, with the JSON input on stdin and in env PLANOPS_INPUT (stdin is
  local only: in a pod the input is in PLANOPS_INPUT alone).
- capsule: the target Capsule's `plan` run in-process as a sub-plan (nesting capped at 8,
  cycles refused), the step's task text given to the child as `input.objective` and the child's
  output taken back as the step's (engine.delegation: the same contract as in the cluster);
  a template step's plan likewise, under this plan's Capsule (both: runners.sub_plans).
- A Capsule's `concurrency.maxRunningPlans` counts this run's sub-plans only (the count in the
  cluster is of Plan objects; one local run is one plan on one machine): at most that many of
  its sub-plans run on the Capsule at once, the others wait for a slot. As in the cluster, a
  sub-plan with a limited Capsule above it (the top plan's included: it holds its Capsule's
  only place here) rides that slot and is not counted, so waiting never closes a cycle.
- Each attempt gets what a step pod gets (runners.podlike): planops' PLANOPS_* variables, its
  tool's `env` (a Secret's value refused), its services refused and its security profile noted
  (no sidecar, no other uid here), of this machine's environment only PATH, a fresh
  directory of its own; the steps share files only through the plan's workspace (`workdir`,
  else a fresh temporary directory), as pods share only a volume.
- Limits: the step's timeout and the memory limit (RLIMIT_DATA, the closest per-process
  equivalent of the cgroup limit a Job gets).
- Output: stdout and stderr are read apart, as the operator reads a pod's log; the output is
  stdout's value and the record keeps stderr's tail (engine.outputs: one trailing line end
  dropped, the capsule's outputLimitBytes kept as head and tail).
- Each subprocess is its own process group; cancelling the run (Ctrl-C) kills every group and
  waits for it, so no child is left behind.
- `activeDeadlineSeconds` and the finally steps' budget as in the cluster (engine.finally_steps,
  Run.halt): past the deadline the main steps' processes are killed and recorded failed, the
  finally steps run within their budget, and those still running when it ends are killed.
- ask (seed 2): the answer given on the command line (`--answer STEP.KEY=VALUE`), else the
  `asker` (an interactive prompt when a terminal is attached; Ctrl-D declines), else nobody can
  be asked: `whenUnanswered` decides (default answer, or the step fails).
- Dispatch-time policy refusals (binary or capsule no longer allowed) settle the step failed with
  the refusal as its error and a `call_denied` trace record, as seed 1 says; nothing runs. They,
  the timeout and the memory limit are the cluster's rules (engine.dispatch), applied the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planops.api import CapsuleSpec, PlanSpec, Tool
from planops.api.template_models import PlanTemplateSpec
from planops.engine import (
    AttemptFact,
    Dispatch,
    Facts,
    Policy,
    Report,
    Run,
    capsule_name,
    control,
    finally_steps,
    plan_templates,
    shell_words,
    step_files,
    step_grants,
)
from planops.engine import dispatch as dispatch_
from planops.engine import policy as policy_
from planops.runners import files, podlike, processes
from planops.runners.processes import Result
from planops.runners.sub_plans import SubPlans

#: Trace records, by the seed's names: plan_start, plan_step_start, plan_step, plan_end,
#: delegation_start, delegation, call_denied, notice.
Record = dict[str, Any]
Observer = Callable[[Record], None]

MAX_DEPTH = policy_.MAX_DEPTH
#: asks a person: (step id, rendered ask) -> an answer conforming to its schema, or None (declined)
Asker = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any] | None]]
#: an attempt: (step id, attempt)
Key = tuple[str, int]


@dataclass
class LocalRunner:
    """Runs plans on this machine. `capsules` are all Capsules known (by name)."""

    capsules: Mapping[str, CapsuleSpec]
    #: the templates known (the CLI's --template files), by (kind, name)
    templates: Mapping[tuple[str, str], PlanTemplateSpec] = field(default_factory=dict)
    #: the top plan's workspace (it must declare `spec.workspace`); None: a fresh one
    workdir: Path | None = None
    observer: Observer = field(default=lambda _record: None)
    #: the artifacts directory is a repository every Capsule has here (engine.step_files)
    policy: Policy = field(default_factory=lambda: Policy(artifact_repository=True))
    clock: Callable[[], float] = time.time
    #: answers given in advance, by step id (body steps by qualified name): field -> text
    answers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    asker: Asker | None = None
    #: where results and artifacts are kept (`--artifacts DIR`); None: a temporary directory,
    #: removed after the run (runners.files)
    artifacts: Path | None = None
    _repository: files.LocalRepository | None = field(default=None, init=False)
    _noticed_images: bool = field(default=False, init=False)
    #: its capsule and template steps' child plans (runners.sub_plans)
    _sub_plans: SubPlans = field(init=False)

    def __post_init__(self) -> None:
        self._sub_plans = SubPlans(self.capsules, self.templates, self.policy, self.run)

    async def run(
        self,
        plan_id: str,
        spec: PlanSpec,
        lineage: tuple[str, ...] = (),
        seed: Facts | None = None,
    ) -> Report:
        """Run a *validated* plan to the end and return its report.

        `lineage` names the capsules of the plans above this one (empty for a top-level plan).
        `seed`: the records an earlier run keeps (engine.retry): a retry starts from them.
        """
        top = not lineage
        if spec.template_ref is not None:  # a plan from a template runs the template's plan
            ref = spec.template_ref
            spec = plan_templates.expand(spec, self.templates[(ref.kind, ref.name)])
        lineage = (*lineage, capsule_name(spec))
        capsule = self.capsules[lineage[-1]]
        self._notice_images(spec, capsule)
        with (
            podlike.workspace(plan_id, spec, self.workdir, top) as workspace,
            self._files(top),
        ):
            if workspace is not None and (notice := podlike.read_only_notice(capsule)):
                self.observer({"time": self.clock(), "event": "notice", "message": notice})
            where = podlike.Where(plan_id, workspace)
            return await self._run_in(plan_id, spec, capsule, lineage, where, seed)

    async def _run_in(
        self,
        plan_id: str,
        spec: PlanSpec,
        capsule: CapsuleSpec,
        lineage: tuple[str, ...],
        where: podlike.Where,
        seed: Facts | None = None,
    ) -> Report:
        backoff = capsule.retry_backoff
        run = (
            Run(plan_id, spec, retry_backoff=backoff)
            if seed is None
            else Run.restore(plan_id, spec, seed, retry_backoff=backoff)
        )
        emit = self._emitter(plan_id, lineage)
        workspace = str(where.workspace) if where.workspace is not None else None
        start: Record = {"event": "plan_start", "steps": len(spec.steps), "workspace": workspace}
        if seed is not None:
            start["kept"] = len(seed.settled)  # a retry: records of the earlier run kept
        emit(start)
        tasks: dict[asyncio.Task[Result], Dispatch] = {}
        started = self.clock()
        try:
            while True:
                now = self.clock()
                stops = len(run.stops())
                if (halt := finally_steps.past_deadline(spec, started, now)) is not None:
                    await _stop(tasks, run.halt(halt, now))  # what ran past it: killed
                decision = run.decide(now)
                await _stop(tasks, decision.stop)  # the finally steps' budget ran out
                for h in run.stops()[stops:]:
                    emit({"event": "notice", "message": f"{h.label} ({h.why})"})
                for rec in decision.settled:  # settled by the decider itself (skips, refs)
                    emit({"event": "plan_step", **rec.to_json()})
                for d in decision.dispatch:
                    emit(
                        {
                            "event": "plan_step_start",
                            "stepId": d.step.id,
                            "attempt": d.attempt,
                            "kind": d.kind,
                        }
                    )
                    task = asyncio.create_task(self._execute(d, capsule, lineage, where, emit))
                    tasks[task] = d
                if decision.finished:
                    break
                # a retry waiting out its backoff (or the finally steps' budget, the plan's
                # deadline): decide again when it is due
                ends = finally_steps.deadline(spec, started)
                if ends is not None and ends <= now:  # passed: applied above
                    ends = None
                due = [t for t in (decision.wake_at, ends) if t is not None]
                wait = max(0.0, min(due) - self.clock()) if due else None
                if not tasks:
                    await asyncio.sleep(wait if wait is not None else 0.0)
                    continue
                done, _ = await asyncio.wait(
                    tasks, timeout=wait, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    d = tasks.pop(task)
                    result = task.result()
                    run.finish_fact(_fact(d, result, self.clock()))
                    # settlements are announced by the next decision; a failure that did not
                    # settle the step means another attempt follows
                    if result.status == "failed" and not run.is_settled(d.step.id):
                        emit(
                            {
                                "event": "plan_step_retry",
                                "stepId": d.step.id,
                                "attempt": d.attempt,
                                "error": result.error,
                            }
                        )
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
        report = run.report()
        emit({"event": "plan_end", "completed": report.completed, "failedStep": report.failed_step})
        return report

    @contextlib.contextmanager
    def _files(self, top: bool) -> Iterator[None]:
        """The run's repository of results and artifacts: --artifacts DIR, else a temporary
        directory removed after the top plan's run (its sub-plans share it)."""
        if not top or self._repository is not None:
            yield
            return
        with contextlib.ExitStack() as stack:
            root = self.artifacts
            if root is None:
                root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="planops-")))
            self._repository = files.LocalRepository(root)
            try:
                yield
            finally:
                self._repository = None

    def _emitter(self, plan_id: str, lineage: tuple[str, ...]) -> Callable[[Record], None]:
        def emit(record: Record) -> None:
            self.observer(
                {"time": self.clock(), "planId": plan_id, "depth": len(lineage) - 1, **record}
            )

        return emit

    def _notice_images(self, spec: PlanSpec, capsule: CapsuleSpec) -> None:
        uses_images = (
            capsule.image or any(s.image for s in spec.steps) or any(t.image for t in capsule.tools)
        )
        if uses_images and not self._noticed_images:
            self._noticed_images = True
            self.observer(
                {
                    "time": self.clock(),
                    "event": "notice",
                    "message": "the local runner does not pull images: steps run with this "
                    "machine's binaries",
                }
            )

    # -- one attempt --------------------------------------------------------------------------

    async def _execute(
        self,
        d: Dispatch,
        capsule: CapsuleSpec,
        lineage: tuple[str, ...],
        where: podlike.Where,
        emit: Callable[[Record], None],
    ) -> Result:
        refusal = dispatch_.admit(
            d, capsule, self.policy, lineage=lineage, depth=len(lineage) - 1, needs_image=False
        )
        if refusal is not None:
            reason = refusal.removeprefix(dispatch_.DENIED)
            emit({"event": "call_denied", "stepId": d.step.id, "reason": reason})
            return Result("failed", None, refusal)
        notices, refused = podlike.pod_grants(d, capsule)  # what a pod has and a laptop not
        if refused:
            return Result("failed", None, "; ".join(refused))
        for message in notices:
            emit({"event": "notice", "stepId": d.step.id, "message": message})
        if d.kind == "ask":
            return await self._ask(d)
        if d.kind == "capsule":
            return await self._sub_plans.capsule_step(d, lineage, emit)
        if d.kind == "template":
            return await self._sub_plans.template_step(d, lineage, emit)
        if d.kind == "tool":
            tool = capsule.tool(d.step.tool or "")
            assert tool is not None  # admitted
            payload = json.dumps(d.input if d.input is not None else {})
            return await self._attempt(tool.command, d, capsule, where, payload, tool, emit)
        if d.kind == "script":  # its interpreter, on this machine's PATH
            argv = step_grants.script_argv(d.step, capsule)
            return await self._attempt(argv, d, capsule, where, None, None, emit)
        words = d.words or shell_words(d.step.shell or "")
        return await self._attempt(words, d, capsule, where, None, None, emit)

    async def _attempt(
        self,
        argv: list[str],
        d: Dispatch,
        capsule: CapsuleSpec,
        where: podlike.Where,
        stdin: str | None,
        tool: Tool | None,
        emit: Callable[[Record], None],
    ) -> Result:
        """One process where a pod would run it: in a fresh directory of its own (a shell step
        of a run with a workspace: in the workspace), with the environment a pod would give it."""
        own: dict[str, str] = {}
        if tool is not None:  # its env and command as the kubelet makes them
            declared = podlike.declared(where, d)
            own, unset, refusals = podlike.tool_env(tool, declared)
            if refusals:
                return Result("failed", None, "; ".join(refusals))
            for message in unset:
                emit({"event": "notice", "stepId": d.step.id, "message": message})
            argv = [podlike.expand(word, declared | own) for word in argv]
        elif d.step.env or d.step.volume_mounts:  # a shell or script step's own
            own, unset, refusals = podlike.step_env(d)
            refusals += podlike.mount_refusals(d, capsule)
            if refusals:
                return Result("failed", None, "; ".join(refusals))
            for message in unset:
                emit({"event": "notice", "stepId": d.step.id, "message": message})
        with podlike.private_dir(d) as private:
            env = podlike.environment(where, d, private) | own
            shared = where.workspace if tool is None else None  # a tool: never in the workspace
            cwd = shared if shared is not None else private
            if not step_files.uses_files(d.step):
                return await self._process(argv, d, capsule, cwd, env, stdin)
            assert self._repository is not None  # made by run()

            def process(env: dict[str, str]) -> Awaitable[Result]:
                return self._process(argv, d, capsule, cwd, env, stdin)

            return await self._repository.attempt(where.plan, d, capsule, cwd, env, process)

    async def _ask(self, d: Dispatch) -> Result:
        spec: dict[str, Any] = d.input
        schema = spec["outputSchema"]
        given = self.answers.get(d.step.id)
        answer: dict[str, Any] | None
        if given is not None:
            try:
                answer = {k: control.coerce_answer(schema, k, v) for k, v in given.items()}
            except ValueError as e:
                return Result("failed", None, f"--answer for {d.step.id}: {e}")
            problem = control.answer_problem(schema, answer)
            if problem:
                return Result("failed", None, f"--answer for {d.step.id}: {problem}")
            return Result("success", json.dumps(control.answered(answer)), None)
        reason = "unavailable"
        if self.asker is not None:
            answer = await self.asker(d.step.id, spec)
            if answer is not None:
                return Result("success", json.dumps(control.answered(answer)), None)
            reason = "declined"
        result, error = control.unanswered(spec, reason)
        if result is None:
            return Result("failed", None, error)
        return Result("success", json.dumps(result), None)

    async def _process(
        self,
        argv: list[str],
        d: Dispatch,
        capsule: CapsuleSpec,
        cwd: Path,
        env: dict[str, str],
        stdin: str | None,
    ) -> Result:
        timeout = dispatch_.timeout_seconds(d.step, capsule, self.policy)
        try:
            memory = dispatch_.memory_limit_bytes(d.step, capsule)
        except ValueError as e:  # a Capsule's default (a step's own is refused by the validator)
            return Result("failed", None, f"resources.limits.memory: {e}")
        if shutil.which(argv[0], path=env.get("PATH")) is None and not Path(argv[0]).is_file():
            return Result("failed", None, f"{argv[0]!r}: binary not found on PATH")
        return await processes.run(
            argv, cwd, env, stdin, timeout, memory, capsule.output_limit_bytes
        )


def _fact(d: Dispatch, result: Result, now: float) -> AttemptFact:
    """What the engine is told of an ended attempt (its results and artifacts included)."""
    return AttemptFact(
        d.step.id,
        d.attempt,
        0.0,
        result.status,
        now,
        result.output,
        result.error,
        stderr=result.stderr,
        results=result.results,
        artifacts=result.artifacts,
    )


async def _stop(tasks: dict[asyncio.Task[Result], Dispatch], attempts: Iterable[Key]) -> None:
    """Kill the processes (and sub-plans) of attempts the engine stopped, and wait for them:
    the engine recorded them failed already, so their results are not reported."""
    stopping = set(attempts)
    doomed = [t for t, d in tasks.items() if (d.step.id, d.attempt) in stopping]
    for task in doomed:
        del tasks[task]
        task.cancel()
    if doomed:
        await asyncio.gather(*doomed, return_exceptions=True)

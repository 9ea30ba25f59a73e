"""A step's output and stderr, read from its pod's log: the two streams apart where the cluster
can select a log stream, both as one where it cannot (the fallback, docs/operator.md).

A container's stdout and stderr go to one log; the pods/log API gives them interleaved unless the
request selects one (`stream=Stdout|Stderr`, KEP-3288). That selection is behind the feature gate
PodLogsQuerySplitStreams, alpha since Kubernetes 1.32 and off by default (1.36 included), on the
API server *and* on each kubelet. So, per read:

- split: two reads at once, `stream=Stdout` (the output) and `stream=Stderr` (its tail kept),
  each streamed through a bounded Capture (engine.outputs): the step pod stays one container,
  and the cost is one more log request per ended attempt (docs/performance.md);
- the cluster cannot: the API server refuses the parameter (422, gate off), a kubelet refuses it
  (400, gate off on that node; the API server passes the kubelet's answer on), or an API server or
  kubelet older than 1.32 ignores it (both reads give the same text). Then the output is the log
  as one (stdout and stderr interleaved, as `kubectl logs` shows it), the record has no stderr,
  and the run's report says so (`stderrInOutput`: effects.reads.RunRead.merged). After a refusal,
  reads take the log as one, one request each as before the split existed, for RECHECK_SECONDS, then
  the cluster is asked again (a gate turned on later is used). A refusal is the cluster's answer to
  the request, which no step can change; the same text on both streams is not remembered (a step can
  print it: it changes only that step's record).

A refusal is taken for the cluster's only when the same log read without the parameter
succeeds: a log that cannot be read at all (a container that never started) says nothing about
stream selection.

The reads themselves are effects.reads' (`Fetch`, one request of a pod's log): this module
decides which to make and what their answers mean.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from planops.engine import outputs
from planops.kube.errors import ApiError, ErrorKind

log = logging.getLogger("planops.reconciler")

#: after the cluster could not split a log, how long reads take it as one before asking again
RECHECK_SECONDS = 600.0
#: the most of one stream read (limitBytes): the kubelet serves a container's current log file
#: (10 MiB by default, containerLogMaxSize); past this the tail kept is the tail of what was read
READ_LIMIT = 64 << 20
#: one read of a pod's log: (namespace, pod, where each chunk goes, the stream or None for both)
Fetch = Callable[[str, str, Callable[[bytes], None], str | None], Awaitable[None]]
#: what the API server (Invalid) and the kubelet (BadRequest) answer to a stream they will not
#: select (gate off)
REFUSED = (ErrorKind.BAD_REQUEST, ErrorKind.INVALID)
#: how the kubelet answers a log request when the container's log file is gone
LOG_LOST = "unable to retrieve container logs for "


@dataclass(frozen=True)
class StepLog:
    """What a read gives a record: the output (stdout's value), the tail of stderr, and whether
    the two came as one (the cluster could not split them)."""

    output: str | None
    stderr: str | None
    merged: bool


@dataclass
class LogStreams:
    """Reads ended attempts' logs; remembers whether the cluster can select a stream."""

    fetch: Fetch
    clock: Callable[[], float]
    #: until when reads take the log as one (the cluster could not split it), and why
    merged_until: float = 0.0
    why: str = ""

    @property
    def splits(self) -> bool:
        return self.clock() >= self.merged_until

    async def read(
        self, namespace: str, pod: str, limit: int, why: str = outputs.OUTPUT_LIMIT
    ) -> StepLog:
        """The attempt's output within `limit` bytes (`why` that limit, for a cut's mark) and
        its stderr's tail; raises ApiError when the log cannot be read."""
        if not self.splits:
            return await self._merged(namespace, pod, limit, why)
        stdout, stderr = outputs.Capture.for_limit(limit), outputs.stderr_capture()
        got = await asyncio.gather(  # at once: the split adds a request, not its wait
            self._read(namespace, pod, stdout, "Stdout"),
            self._read(namespace, pod, stderr, "Stderr"),
            return_exceptions=True,
        )
        failed = [e for e in got if isinstance(e, BaseException)]
        if failed:
            e = failed[0]
            if not isinstance(e, ApiError) or e.kind not in REFUSED:
                raise e
            merged = await self._merged(namespace, pod, limit, why)  # raises if unreadable
            self._cannot(f"the log API answered {e.status} {e.reason}: {e.message[:300]}")
            return merged
        output = outputs.output_value(stdout, limit, why)
        if stdout.total < 1024 and stdout.last(1024).startswith(LOG_LOST.encode()):
            return StepLog(output, None, merged=False)  # the kubelet's word: the log is gone
        if stderr.total and _same(stdout, stderr):
            # an API server or kubelet older than 1.32 ignores the selection: this read's
            # log is one. Not remembered: a step can write the same to both streams, and one
            # tenant's step must not change how every other step's log is read
            return StepLog(output, None, merged=True)
        return StepLog(output, outputs.stderr_value(stderr), merged=False)

    async def _merged(self, namespace: str, pod: str, limit: int, why: str) -> StepLog:
        both = outputs.Capture.for_limit(limit)
        await self._read(namespace, pod, both, None)
        return StepLog(outputs.output_value(both, limit, why), None, merged=True)

    async def _read(
        self, namespace: str, pod: str, capture: outputs.Capture, stream: str | None
    ) -> None:
        await self.fetch(namespace, pod, capture.feed, stream)

    def _cannot(self, why: str) -> None:
        if self.splits:
            log.warning(
                "step logs are read with stdout and stderr as one for %gs: %s (enable the "
                "feature gate PodLogsQuerySplitStreams on the API server and the kubelets)",
                RECHECK_SECONDS,
                why,
            )
        self.merged_until, self.why = self.clock() + RECHECK_SECONDS, why


def _same(stdout: outputs.Capture, stderr: outputs.Capture) -> bool:
    """Both reads gave the same text: the selection was ignored (a program writing the very
    same bytes to both streams is taken for that too, and loses nothing: its output is them,
    and only its own record is read so)."""
    return stdout.total == stderr.total and stdout.last(256) == stderr.last(256)

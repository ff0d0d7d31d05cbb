"""Running :func:`._worker.compare_file` over every dump file, on worker processes that may die.

:func:`run_jobs` compares in this process for one worker or a handful of files, else on
``workers`` processes (``fork`` where it is safe, else ``spawn``) that receive jobs (file paths and
names, never arrays) over a pipe in batches, at most :data:`_IN_FLIGHT` batches at a time each, and
send back the batch's :class:`~._worker.FileResult` list in one message. The golden index is handed
to each worker once. Batches shrink as the work runs out (a quarter of what is left per worker, at
most :data:`_BATCH_MAX` files, one file at the end): a message per file cost the main process
~150 us of CPU per file (10,000 files: 1.5 s, on a core the workers need). Each worker takes its
batches from its own contiguous run of the files (the k-th of ``workers`` equal runs; one whose run is
done takes the back half of the longest run left), so a file's producer was most often compared by
the same worker just before: its input is that output again and the worker reuses its metrics
(:mod:`._worker`). Handing out the next batch of one shared queue instead split producer and
consumer at every batch's first file (1,000-op bench bundle, 2 workers: 74 of 999 inputs computed
again).

A worker that dies (the out-of-memory killer's SIGKILL, a crash in a native library) is
seen at once (its process sentinel; ``multiprocessing.Pool`` waited forever for the lost
work): the job it was running is redone once in a new worker, its queued jobs are handed
out again; a job whose worker dies twice is a FileResult whose error names the file and the
signal (reason ``worker died``, which makes the comparison incomplete). Nothing waits forever.
When the running batch held several files, which one killed it is not known: each of them is
redone alone (not counted as a try), so the next death names its file.

Test-only: a pool worker whose job path contains the value of the environment variable
``NPU_DUMP_HOOK_TEST_KILL_WORKER`` kills itself with SIGKILL before comparing it (read only
by pool workers; ``substring@flag`` kills only while the file ``flag`` does not exist, and
creates it: one death, then the redo succeeds).
"""
import collections
import multiprocessing
import os
import signal
from multiprocessing.connection import wait
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Set

from .._forked import fork_is_safe
from ..errors import OptionError
from ._blas import single_blas_thread
from ._worker import REASON_WORKER_DIED, FileJob, FileResult, compare_file, init_worker

__all__ = ["run_jobs", "worker_count", "TEST_KILL_ENV"]

#: Test-only fault injection (see the module doc).
TEST_KILL_ENV = "NPU_DUMP_HOOK_TEST_KILL_WORKER"
_IN_FLIGHT = 2  # batches queued per worker: one running, one ready
_BATCH_MAX = 16  # files per batch at most
_BATCH_SHARE = 4  # a batch is at most 1/_BATCH_SHARE of the files left per worker
_TRIES = 2  # a job is run at most this many times when its worker dies
_STOP_WAIT = 5.0  # seconds a worker gets to exit after the last job


def worker_count(workers: Optional[int]) -> int:
    """The ``workers`` option of compare() and compare_ranks() checked: None is every core."""
    if workers is None:
        return os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise OptionError("workers", workers, "must be a positive int")
    return workers


def _context() -> Any:
    """``fork`` where it is safe (:func:`~npu_dump_hook._forked.fork_is_safe`: no other thread, no
    TensorFlow loaded, whose native threads may hold locks a forked child would wait on forever),
    else ``spawn``: the workers import only the TF-free compare modules."""
    return multiprocessing.get_context("fork" if fork_is_safe() else "spawn")


def _test_kill(job: FileJob) -> None:
    """The test-only injection point (module doc)."""
    spec = os.environ.get(TEST_KILL_ENV)
    if not spec:
        return
    needle, _, flag = spec.partition("@")
    if needle not in job.path:
        return
    if flag:
        if os.path.exists(flag):
            return
        open(flag, "w").close()
    os.kill(os.getpid(), signal.SIGKILL)


def _serve(conn: Any, golden: Dict[str, str]) -> None:
    """A worker process: compare every batch of jobs received until None or the pipe closes."""
    init_worker(golden, True)
    while True:
        try:
            batch = conn.recv()
        except EOFError:
            return
        if batch is None:
            return
        results = []
        for job in batch:
            _test_kill(job)
            results.append(compare_file(job))
        conn.send(results)


class _Worker(object):
    def __init__(self, context: Any, golden: Dict[str, str]) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, golden), daemon=True)
        self.process.start()
        child.close()
        self.jobs = collections.deque()  # type: Deque[List[FileJob]]  # batches sent, oldest first

    def stop(self, wait_s: float) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(wait_s)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        self.conn.close()


def _death(worker: _Worker) -> str:
    worker.process.join()
    code = worker.process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "signal {}".format(-code)
        return "killed by {}{}".format(name, " (the out-of-memory killer?)" if -code == signal.SIGKILL else "")
    return "exited with code {}".format(code)


class _Pool(object):
    """The workers and the jobs not yet done (see the module doc)."""

    def __init__(self, jobs: Sequence[FileJob], golden: Dict[str, str], workers: int) -> None:
        self.context = _context()
        self.golden = golden
        count = min(workers, len(jobs))
        # worker k's jobs, a contiguous run of the files (module doc)
        self.segments = [collections.deque(jobs[k * len(jobs) // count:(k + 1) * len(jobs) // count])
                         for k in range(count)]  # type: List[Deque[FileJob]]
        self.tries = {}  # type: Dict[int, int]
        self.alone = set()  # type: Set[int]  # jobs of a batch whose worker died: redone one per batch
        self.workers = [_Worker(self.context, golden) for _ in range(count)]

    def _left(self) -> int:
        return sum(len(segment) for segment in self.segments)

    def _segment(self, slot: int) -> Deque[FileJob]:
        """Worker ``slot``'s jobs; when none are left, the back half of the longest run is moved to it."""
        own = self.segments[slot]
        if not own:
            longest = max(self.segments, key=len)
            taken = [longest.pop() for _ in range((len(longest) + 1) // 2)]
            own.extend(reversed(taken))
        return own

    def _batch(self, slot: int) -> List[FileJob]:
        """Worker ``slot``'s next batch: a share of what is left (module doc); a job to be redone alone, alone."""
        size = max(1, min(_BATCH_MAX, self._left() // (len(self.workers) * _BATCH_SHARE)))
        own = self._segment(slot)
        batch = [own.popleft()]
        while len(batch) < size and own and batch[0].job not in self.alone and own[0].job not in self.alone:
            batch.append(own.popleft())
        return batch

    def feed(self) -> None:
        for slot, worker in enumerate(self.workers):
            while len(worker.jobs) < _IN_FLIGHT and self._left():
                batch = self._batch(slot)
                worker.jobs.append(batch)
                try:
                    worker.conn.send(batch)
                except (OSError, ValueError):  # died: its sentinel says so next
                    break

    def collect(self) -> List[FileResult]:
        """Results of the workers that answered; dead workers replaced, their jobs redone."""
        ready = set(wait([w.conn for w in self.workers] + [w.process.sentinel for w in self.workers]))
        results = []  # type: List[FileResult]
        for worker in list(self.workers):
            died = False
            while (worker.conn in ready or worker.process.sentinel in ready) and worker.conn.poll():
                try:
                    results.extend(worker.conn.recv())
                except (EOFError, OSError):
                    died = True
                    break
                worker.jobs.popleft()
            if died or worker.process.sentinel in ready:
                results.extend(self._replace(worker))
        return results

    def _replace(self, worker: _Worker) -> List[FileResult]:
        how = _death(worker)
        worker.conn.close()
        slot = self.workers.index(worker)
        self.workers[slot] = _Worker(self.context, self.golden)
        failed = []  # type: List[FileResult]
        left = [job for batch in worker.jobs for job in batch]
        if len(worker.jobs[0] if worker.jobs else ()) > 1:  # which file killed it is not known
            self.alone.update(job.job for job in worker.jobs[0])
        elif left:
            running = left.pop(0)
            self.tries[running.job] = self.tries.get(running.job, 0) + 1
            if self.tries[running.job] >= _TRIES:
                failed.append(FileResult(running.job, None, None, "{}: the worker comparing {} was {}, {} times".format(
                    REASON_WORKER_DIED, running.path, how, self.tries[running.job]), []))
            else:
                left.insert(0, running)
        self.segments[slot].extendleft(reversed(left))
        return failed

    def close(self, wait_s: float) -> None:
        for worker in self.workers:
            worker.stop(wait_s)


def run_jobs(jobs: Sequence[FileJob], golden: Dict[str, str], workers: int,
             done: Optional[Callable[[FileResult], None]] = None) -> Iterator[FileResult]:
    """:func:`compare_file` over ``jobs``, on ``workers`` processes (in this process for 1 or
    for a handful of jobs); results in completion order, ``done`` called after each."""
    if workers <= 1 or len(jobs) < 4:
        init_worker(golden)
        for job in jobs:
            with single_blas_thread():  # not across the yield: the caller's code runs there
                result = compare_file(job)
            if done is not None:
                done(result)
            yield result
        return
    pool = _Pool(jobs, golden, workers)
    left = len(jobs)
    wait_s = 0.0
    try:
        while left:
            pool.feed()
            for result in pool.collect():
                left -= 1
                if done is not None:
                    done(result)
                yield result
        wait_s = _STOP_WAIT
    finally:
        pool.close(wait_s)

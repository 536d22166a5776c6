"""Small-model calls with retries that never hold the scheduler (SPEC §4, §5.3).

A task that calls the model is a generator: instead of sleeping through a backoff it yields a
:class:`Backoff`, and the scheduler serves other work (other agents, user calls) until the
delay has passed. The backoff policy itself is tenacity's exponential wait.

A call to a model that waits on a network (:func:`calls_off_thread`: the HTTP models) is not
made by the task either: it yields an :class:`AwaitCall`, the scheduler runs the call in one
of its model-call threads and serves other work until it returned (issue 33 F4); the task
then reads the answer (or the exception) with :meth:`AwaitCall.result`. Calls of an
in-process model (the built-in one) run in the task, on the scheduler thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tenacity import RetryCallState, wait_exponential

from memory_rdf._config import Config
from memory_rdf._exceptions import ModelError, PermanentModelError

T = TypeVar("T")

log = logging.getLogger("memory_rdf")

#: The agent whose task is running (set by the scheduler around each step), for log lines.
current_agent: ContextVar[str] = ContextVar("memory_rdf_current_agent", default="")


def log_failed_attempt(label: str, reason: str, outcome: str) -> None:
    """One WARNING per failed small-model attempt, with its reason and what happens next
    ("failures are loud": a model server that is down shows at the first failed call)."""
    agent = current_agent.get()
    who = f"agent {agent!r}: " if agent else ""
    reason = reason.removeprefix(f"small model {label}() failed: ")
    log.warning("memory_rdf: %ssmall model %s() failed (%s): %s", who, label, outcome, reason)


@dataclass(frozen=True)
class Backoff:
    """Yielded by a task: resume me after ``delay`` seconds."""

    delay: float


@dataclass(eq=False)
class AwaitCall:
    """Yielded by a task: run ``fn`` (a model call that waits on a network) off the scheduler
    thread and resume me when it returned; then :meth:`result` is its value or raises its
    exception. The scheduler sets ``future``."""

    fn: Callable[[], Any]
    future: Future[Any] | None = None

    def result(self) -> Any:
        if self.future is None or not self.future.done():
            raise RuntimeError("a task resumed before its model call returned")
        return self.future.result()

    def run_here(self) -> None:
        """Make the call in the calling thread (a task driven without a scheduler)."""
        future: Future[Any] = Future()
        try:
            future.set_result(self.fn())
        except BaseException as exc:  # the task reads it from result()
            future.set_exception(exc)
        self.future = future


#: What a task yields: wait out a delay, or wait for a model call made off the thread.
Wait = Backoff | AwaitCall
TaskGen = Generator[Wait, None, T]


def calls_off_thread(model: object) -> bool:
    """Whether the calls of ``model`` run in the scheduler's model-call threads (each an
    :class:`AwaitCall`) rather than in the task: a model's own ``calls_off_thread`` attribute
    when it has a bool one, else True for the models that send requests — those that take
    ``Config.model_timeout`` (``use_default_timeout``, see :func:`apply_model_timeout`), the
    HTTP models, which are thread-safe. An in-process model (the built-in one, your own)
    keeps running in the task, on the scheduler thread: its calls stay serialized as they
    always were (it need not be thread-safe), and a thread hand-off gains it nothing (issue
    33: no difference within the benchmark's noise). Set ``calls_off_thread = True`` on a
    thread-safe in-process model whose calls are slow."""
    own = getattr(model, "calls_off_thread", None)
    if isinstance(own, bool):
        return own
    return callable(getattr(model, "use_default_timeout", None))


def model_call(
    fn: Callable[[], T], stats: CallStats, label: str, off_thread: bool
) -> Generator[Wait, None, T]:
    """One :func:`attempt` at ``fn``: made here, or (``off_thread``) yielded as an
    :class:`AwaitCall` for the scheduler to run in a model-call thread — the attempt's
    accounting, per-thread request counts included, runs with it in that thread."""
    if not off_thread:
        return attempt(fn, stats, label)
    call = AwaitCall(lambda: attempt(fn, stats, label))
    yield call
    return call.result()


def backoff_delay(config: Config, attempt: int) -> float:
    """Delay after the ``attempt``-th failed attempt (1-based)."""
    state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]
    state.attempt_number = attempt
    wait = wait_exponential(multiplier=config.retry_initial_delay, max=config.retry_max_delay)
    return float(wait(state))


@dataclass
class CallStats:
    """How many model calls a piece of work made (for slice reports and stats()).

    ``failures`` counts failed attempts; ``retries`` the failed attempts that were tried
    again (a call retried after a backoff, a remember requeued after a failed segmentation).
    ``failures - retries`` is the calls given up on: fallen back (to the text itself, the
    built-in model, no relation name, the single calls of a failed batch) or failing their
    task.
    """

    calls: int = 0
    failures: int = 0
    retries: int = 0
    seconds: float = 0.0
    requests: int = 0  # HTTP requests (HTTP models only)
    invalid_answers: int = 0  # failed requests whose answer was unusable (HTTP models)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    by_task: dict[str, int] = field(default_factory=dict)
    last_error: str = ""  # the reason of the latest failed attempt ("" = none yet)

    def add(self, other: CallStats) -> None:
        self.calls += other.calls
        self.failures += other.failures
        self.retries += other.retries
        self.seconds += other.seconds
        self.requests += other.requests
        self.invalid_answers += other.invalid_answers
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        for k, v in other.by_task.items():
            self.by_task[k] = self.by_task.get(k, 0) + v
        if other.last_error:
            self.last_error = other.last_error

    def usage(self) -> dict[str, Any]:
        """The request counters as :meth:`HTTPModel.usage` reports them."""
        return {
            "requests": self.requests,
            "failures": self.failures,
            "invalid_answers": self.invalid_answers,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 6),
        }


_thread = threading.local()


def thread_usage() -> tuple[int, int, int]:
    """``(requests, prompt_tokens, completion_tokens)`` sent by HTTP models from the calling
    thread so far (all models together). The difference around a call attributes its tokens
    to whatever made it, even when one model serves many agents or threads."""
    return (
        getattr(_thread, "requests", 0),
        getattr(_thread, "prompt_tokens", 0),
        getattr(_thread, "completion_tokens", 0),
    )


def count_request(prompt_tokens: int, completion_tokens: int) -> None:
    """An HTTP model sent one request from this thread (see :func:`thread_usage`)."""
    _thread.requests = getattr(_thread, "requests", 0) + 1
    _thread.prompt_tokens = getattr(_thread, "prompt_tokens", 0) + prompt_tokens
    _thread.completion_tokens = getattr(_thread, "completion_tokens", 0) + completion_tokens


def attempt(fn: Callable[[], T], stats: CallStats, label: str) -> T:
    """One attempt, counted. Exceptions propagate (wrapped in ModelError unless ours)."""
    stats.calls += 1
    stats.by_task[label] = stats.by_task.get(label, 0) + 1
    start = time.perf_counter()
    before = thread_usage()
    try:
        return fn()
    except PermanentModelError as exc:
        stats.failures += 1
        stats.last_error = f"{label}(): {exc}"
        raise
    except Exception as exc:
        stats.failures += 1
        stats.last_error = f"{label}(): {type(exc).__name__}: {exc}"
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"small model {label}() failed: {type(exc).__name__}: {exc}") from exc
    finally:
        stats.seconds += time.perf_counter() - start
        after = thread_usage()
        stats.requests += after[0] - before[0]
        stats.prompt_tokens += after[1] - before[1]
        stats.completion_tokens += after[2] - before[2]


def with_retries(
    fn: Callable[[], T], config: Config, stats: CallStats, label: str,
    off_thread: bool = False,
) -> Generator[Wait, None, T]:
    """Call ``fn`` up to ``1 + max_retries`` times, yielding a Backoff between attempts
    (and each attempt as an :class:`AwaitCall` when ``off_thread``, see :func:`model_call`).

    A :class:`PermanentModelError` (HTTP 400/401/403/404) is raised at once.
    """
    n = 0
    total = 1 + config.max_retries
    while True:
        n += 1
        try:
            return (yield from model_call(fn, stats, label, off_thread))
        except PermanentModelError as exc:
            log_failed_attempt(label, str(exc), "cannot heal by waiting, not retried")
            raise
        except ModelError as exc:
            if n > config.max_retries:
                log_failed_attempt(label, str(exc), f"attempt {n} of {total}, giving up")
                raise
            stats.retries += 1
            delay = backoff_delay(config, n)
            log_failed_attempt(
                label, str(exc), f"attempt {n} of {total}, retrying in {delay:.1f} s"
            )
            yield Backoff(delay)


def apply_model_timeout(model: object, seconds: float) -> None:
    """Give ``model`` the ``Config.model_timeout`` it should bound each request by (SPEC §4).

    Models that send requests (the HTTP models) take it through their
    ``use_default_timeout(seconds)`` unless they were given their own timeout; a model without
    that method (in process, trusted to return) is left alone.
    """
    use = getattr(model, "use_default_timeout", None)
    if callable(use):
        use(seconds)


def run_blocking(gen: Generator[Wait, None, T]) -> T:
    """Drive a task generator to completion in the calling thread, sleeping through backoffs
    and making its off-thread model calls here."""
    try:
        while True:
            wait = next(gen)
            if isinstance(wait, AwaitCall):
                wait.run_here()
            else:
                time.sleep(wait.delay)
    except StopIteration as stop:
        return stop.value

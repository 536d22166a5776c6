"""Ctrl-C held back while a write and the steps that must follow it run.

A KeyboardInterrupt is raised in the main thread at whatever bytecode runs when SIGINT
arrives: between a durable write and the in-memory steps that go with it (the read mirror's
copy of the update, queueing a journalled remember), it leaves the process disagreeing with
its own store. :func:`interrupts_held` makes such a block indivisible for Ctrl-C: an
interrupt that arrives inside it is delivered when it ends (the handler that was in place is
called then), so it lands before the block or after it, never in the middle.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


class Held:
    """The SIGINTs held back by one :func:`interrupts_held` block (none when it holds none:
    another thread's block, or no Python-level handler to stand in for)."""

    def __init__(self, previous: Any = None) -> None:
        self.previous = previous
        self.frames: list[FrameType | None] = []
        #: Added to the KeyboardInterrupt delivered at the end (what the block had done).
        self.note = ""

    def hold(self, signum: int, frame: FrameType | None) -> None:
        self.frames.append(frame)

    def deliver(self) -> None:
        """Deliver the interrupts held so far now (the handler that was in place runs; the
        default one raises KeyboardInterrupt), and go on holding the next ones."""
        if not self.frames:
            return
        frame = self.frames[-1]
        self.frames.clear()
        handler = self.previous
        if handler is signal.SIG_IGN:
            return
        if handler is signal.SIG_DFL:  # what SIGINT does without a Python handler
            restored = signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                signal.raise_signal(signal.SIGINT)
            finally:
                signal.signal(signal.SIGINT, restored)
            return
        try:
            handler(signal.SIGINT, frame)
        except KeyboardInterrupt as exc:
            if self.note:
                exc.add_note(self.note)
            raise


_active: Held | None = None  # the main thread's block in progress (blocks nest)


@contextlib.contextmanager
def interrupts_held(active: bool = True) -> Iterator[Held]:
    """Hold back SIGINT for the block, in the main thread (the only one Python delivers
    signals to; elsewhere, or with ``active`` false, the block runs as is), and deliver it
    when the block ends. Blocks nest: the outermost one delivers. ``Held.deliver()`` inside
    the block delivers what was held so far (before the part that must not be split starts)."""
    global _active
    if not active or threading.current_thread() is not threading.main_thread():
        yield Held()
        return
    if _active is not None:
        yield _active
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is None:  # a handler not installed from Python: leave it alone
        yield Held()
        return
    held = Held(previous)
    try:
        signal.signal(signal.SIGINT, held.hold)
    except ValueError:  # not the main interpreter: no Python handlers here
        yield Held()
        return
    _active = held
    try:
        yield held
    finally:
        _active = None
        signal.signal(signal.SIGINT, previous)
        held.deliver()

"""Stopping compiled searches from outside: Ctrl-C within milliseconds, and deadlines.

Python runs a signal handler only between bytecodes of the main thread, so a long compiled call there never
sees Ctrl-C: the ``KeyboardInterrupt`` waits until the call returns, minutes later. The searches of
:mod:`agents.solver.kernels` therefore release the GIL and poll a stop flag (a one-element array) every few hundred
nodes, and this module sets the flags of the running searches when SIGINT arrives (or SIGTERM, where the program
handles it as Ctrl-C, as the ``quarto`` command does: :func:`experiments.cli.sigterm_as_interrupt`):

* :func:`install` points Python's signal *wakeup fd* (:func:`signal.set_wakeup_fd`) at a pipe. The C-level
  handler writes the signal's number there at once, even while the main thread is inside compiled code.
* A daemon thread reads the pipe; on SIGINT or SIGTERM it sets every flag registered with :func:`stopping`. (The
  handler writes only the signals Python handles: SIGTERM comes through where a handler is set for it.)
* The search returns, and Python's own handler then raises ``KeyboardInterrupt`` as usual.

Nothing changes for a program that has set a wakeup fd of its own (asyncio does): :func:`install` leaves it be,
and Ctrl-C then waits for the compiled call as before.

Deadlines use the same flag: :func:`deadline` has a second daemon thread set it when the time is up, so the
compiled code never reads the clock. (Reading it from compiled code means calling back into Python, with the
GIL: Ctrl-C could then raise its ``KeyboardInterrupt`` inside that call, which numba reports as a
``SystemError``.)
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
import time
from collections.abc import Iterator

import numpy as np

STOPPED_BY_CTRL_C = 1
"""The value a stop flag gets on SIGINT (or SIGTERM)..."""
STOPPED_BY_ANOTHER_THREAD = 2
"""... when another thread of the search has finished it..."""
STOPPED_BY_DEADLINE = 3
"""... and when its deadline has passed."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop the running searches."""

_flags: dict[int, np.ndarray] = {}
_lock = threading.Lock()
_installed = False
_deadlines: dict[int, tuple[float, np.ndarray]] = {}
_deadline_changed = threading.Condition()
_deadline_thread: threading.Thread | None = None


def install() -> bool:
    """Start watching for SIGINT, once per process; returns whether Ctrl-C can stop compiled searches (only the
    main thread can install it, and only where no other wakeup fd is set)."""
    global _installed
    if _installed:
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # not the main interpreter
        os.close(read_end)
        os.close(write_end)
        return False
    if previous != -1:  # someone else's (an event loop): give it back
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)
        return False
    threading.Thread(target=_watch, args=(read_end,), name="quarto-sigint-watcher", daemon=True).start()
    _installed = True
    return True


def _watch(read_end: int) -> None:
    """Set the registered stop flags whenever the number of one of :data:`STOP_SIGNALS` comes through the pipe."""
    while True:
        received = os.read(read_end, 64)
        if not received:
            return
        if any(number in received for number in STOP_SIGNALS):
            with _lock:
                for flag in _flags.values():
                    flag[0] = STOPPED_BY_CTRL_C


@contextlib.contextmanager
def stopping(flag: np.ndarray) -> Iterator[None]:
    """Within the block, SIGINT (or SIGTERM) sets ``flag[0]`` to :data:`STOPPED_BY_CTRL_C`."""
    with _lock:
        _flags[id(flag)] = flag
    try:
        yield
    finally:
        with _lock:
            _flags.pop(id(flag), None)


@contextlib.contextmanager
def deadline(flag: np.ndarray, when: float) -> Iterator[None]:
    """Within the block, ``flag[0]`` becomes :data:`STOPPED_BY_DEADLINE` once ``time.perf_counter()`` passes
    ``when`` (unless it is set already); ``math.inf`` is no deadline."""
    if when == math.inf:
        yield
        return
    if when <= time.perf_counter():
        flag[0] = flag[0] or STOPPED_BY_DEADLINE
        yield
        return
    global _deadline_thread
    with _deadline_changed:
        if _deadline_thread is None:
            _deadline_thread = threading.Thread(target=_watch_deadlines, name="quarto-deadlines", daemon=True)
            _deadline_thread.start()
        _deadlines[id(flag)] = (when, flag)
        _deadline_changed.notify()
    try:
        yield
    finally:
        with _deadline_changed:
            _deadlines.pop(id(flag), None)


def _watch_deadlines() -> None:
    """Sleep until the earliest registered deadline (or a new one), and set the flags whose time is up."""
    with _deadline_changed:
        while True:
            if not _deadlines:
                _deadline_changed.wait()
                continue
            key, (when, flag) = min(_deadlines.items(), key=lambda item: item[1][0])
            remaining = when - time.perf_counter()
            if remaining <= 0:
                flag[0] = flag[0] or STOPPED_BY_DEADLINE
                del _deadlines[key]
            else:
                _deadline_changed.wait(remaining)

"""Ray for the commands that run on it -- ``quarto train`` (``backend: rllib``, or ``algorithm: alphazero`` with
``workers``) and ``quarto sweep``: the address a command may be given, and starting Ray (or joining a cluster).

An address is ``auto`` (the cluster this machine belongs to), ``HOST:PORT`` (a head started with ``ray start
--head``) or ``ray://HOST:PORT`` (Ray Client); :func:`check_address` refuses anything else in one line. Before Ray
is given a ``HOST:PORT`` address, :func:`check_reachable` opens a TCP connection to it: ``ray.init`` waits minutes
on an address where nothing answers, this fails in seconds. :func:`start_ray` starts a local Ray (no address: or
the cluster ``RAY_ADDRESS`` names) unless the process already runs one; when Ray cannot start or the cluster
refuses the connection, it raises :class:`RayStartError` with one line that also names ``RAY_AUTH_MODE=token``:
Ray 2.60 turns token authentication on once it has written a token, and every node (and driver) of such a cluster
then needs that variable set. :func:`quiet_logger` quiets one of Ray's loggers where the command says the same in
its own words, or its advice does not apply.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import sys
import tempfile
from collections.abc import Iterator

from quarto_env.checks import one_line
from quarto_env.errors import RayStartError

ADDRESS = re.compile(r"^(auto|(ray://)?(?P<host>[A-Za-z0-9.\-\[\]:]+):(?P<port>[0-9]{1,5}))$")
AUTH_HINT = (
    "if the cluster uses token authentication (Ray 2.60 turns it on once it has written a token), "
    "set RAY_AUTH_MODE=token here as on its nodes"
)


def check_address(address: str | None) -> str | None:
    """``address`` if it is one Ray can be given; :class:`RayStartError` listing the forms otherwise."""
    match = ADDRESS.match(address) if address is not None else None
    if address is None or (match and (match["port"] is None or 1 <= int(match["port"]) <= 65535)):
        return address
    raise RayStartError(
        f"--address {address!r} is not a Ray address: give auto (the cluster this machine belongs to), HOST:PORT "
        "(e.g. 10.0.0.5:6379, a head started with `ray start --head`) or ray://HOST:PORT (Ray Client, port 1-65535)"
    )


def check_reachable(address: str | None, seconds: float = 5.0) -> None:
    """Open a TCP connection to a ``HOST:PORT`` address before Ray is given it: ``ray.init`` waits minutes on an
    address where nothing answers. :class:`RayStartError` if nothing does."""
    match = ADDRESS.match(address or "")
    if not match or match["port"] is None:
        return  # no address (a local Ray), or auto (Ray finds the cluster this machine belongs to)
    host, port = match["host"].strip("[]"), int(match["port"])
    try:
        socket.create_connection((host, port), timeout=seconds).close()
    except OSError as exc:
        raise RayStartError(
            f"cannot reach a Ray head at {address} ({exc.strerror or exc}): start one there with "
            f"`ray start --head --port={port}`, or give --address auto on a node of the cluster"
        ) from None


def start_ray(address: str | None = None) -> bool:
    """Start Ray, or join the cluster at ``address`` (``None``: the one ``RAY_ADDRESS`` names, else a local Ray),
    unless this process already has; whether it did. :class:`RayStartError` in one line if Ray cannot start.

    A head that requires token authentication refuses a process without ``RAY_AUTH_MODE=token``: Ray's core then
    only logs ``InvalidAuthToken`` on the process's standard error, once a second for the whole timeout, and
    raises a bare ``ConnectionError``. So what Ray writes there while it joins a cluster is held back, passed on
    once it has joined, and read for that refusal if it has not."""
    import ray

    if ray.is_initialized():
        return False
    check_address(address)
    check_reachable(address)
    joining = address is not None or bool(os.environ.get("RAY_ADDRESS"))
    with _native_stderr_held(joining) as held:
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
            failure: Exception | None = None
        except Exception as exc:  # Ray raises many kinds here (ConnectionError, RuntimeError, ValueError, ...)
            failure = exc
    if failure is None:
        sys.stderr.write("".join(held))
        return True
    where = address or os.environ.get("RAY_ADDRESS") or "a local Ray"
    if "InvalidAuthToken" in "".join(held) + str(failure) or isinstance(failure, ray.exceptions.AuthenticationError):
        raise RayStartError(
            f"the Ray cluster at {where} refused this process (InvalidAuthToken): its head requires token "
            "authentication; run with RAY_AUTH_MODE=token, and the head's token in ~/.ray/auth_token or "
            "RAY_AUTH_TOKEN"
        )
    hint = f"; {AUTH_HINT}" if joining else ""  # only a cluster's head can require a token
    raise RayStartError(f"cannot start or reach Ray at {where}: {one_line(failure)}{hint}")


@contextlib.contextmanager
def _native_stderr_held(hold: bool) -> Iterator[list[str]]:
    """Within the block (if ``hold``), what this process writes to file descriptor 2 -- Ray's C++ core too --
    goes to a temporary file; after it, the list holds that text. Not for a block that starts processes, which
    would inherit the file."""
    held: list[str] = []
    if not hold:
        yield held
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield held
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            held.append(capture.read().decode("utf-8", errors="replace"))


@contextlib.contextmanager
def quiet_logger(name: str, level: int = logging.ERROR) -> Iterator[None]:
    """Within the block, the library logger ``name`` shows only messages of ``level`` and above: for a library's
    advice that the command already gives in its own words, or that does not apply to it."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)

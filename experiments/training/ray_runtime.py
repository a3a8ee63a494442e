"""Ray for the commands that run on it -- ``quarto train`` (``backend: rllib``, or ``algorithm: alphazero`` with
``workers``) and ``quarto sweep``: the address a command may be given, and starting Ray (or joining a cluster).

An address is ``auto`` (the cluster this machine belongs to), ``HOST:PORT`` (a head started with ``ray start
--head``) or ``ray://HOST:PORT`` (Ray Client); :func:`check_address` refuses anything else in one line. Before Ray
is given a ``HOST:PORT`` address, :func:`check_reachable` opens a TCP connection to it: ``ray.init`` waits minutes
on an address where nothing answers, this fails in seconds. :func:`start_ray` starts a local Ray (no address: or
the cluster ``RAY_ADDRESS`` names) unless the process already runs one; when Ray cannot start or the cluster
refuses the connection, it raises :class:`RayStartError` with one line that also names ``RAY_AUTH_MODE=token``:
Ray 2.60 turns token authentication on once it has written a token, and every node (and driver) of such a cluster
then needs that variable set.
"""

from __future__ import annotations

import re
import socket

from experiments.training.config import ConfigError
from quarto_env.checks import one_line

ADDRESS = re.compile(r"^(auto|(ray://)?(?P<host>[A-Za-z0-9.\-\[\]:]+):(?P<port>[0-9]{1,5}))$")
AUTH_HINT = (
    "if the cluster uses token authentication (Ray 2.60 turns it on once it has written a token), "
    "set RAY_AUTH_MODE=token here as on its nodes"
)


class RayStartError(ConfigError):
    """A Ray address that is malformed or unreachable, or a Ray that cannot start: one line, no traceback."""


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
    unless this process already has; whether it did. :class:`RayStartError` in one line if Ray cannot start."""
    import ray

    if ray.is_initialized():
        return False
    check_address(address)
    check_reachable(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    except Exception as exc:  # Ray raises many kinds here (ConnectionError, RuntimeError, AuthenticationError, ...)
        where = address or "a local Ray"
        raise RayStartError(f"cannot start or reach Ray at {where}: {one_line(exc)}; {AUTH_HINT}") from None
    return True

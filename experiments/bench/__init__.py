"""``quarto bench WHAT``: the speed benchmarks. Each prints its figures, as ratios to a reference measured in the
same run where one exists.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exit_if_unwritten(prog: str, option: str, path: Path) -> Iterator[None]:
    """Around the final write of ``option``'s file: a write that fails although the path passed the check
    before the run (the disk filled up, the folder went away meanwhile) exits with status 2 and one line on
    stderr naming ``option`` and the reason, after the figures already printed, instead of a traceback."""
    try:
        yield
    except OSError as error:
        print(f"{prog}: error: {option} {str(path)!r} could not be written: {error.strerror or error}", file=sys.stderr)
        raise SystemExit(2) from None

"""The documentation of a config dataclass's fields, read from its source: the help of a command whose options are
those fields (``quarto train --help-config``)."""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap


def field_docs(kind: type) -> dict[str, str]:
    """Each field's docstring (the string literal under it) in the source of the dataclass ``kind``, on one line:
    the help of a command whose options are a dataclass's fields (``quarto train --help-config``)."""
    body = ast.parse(textwrap.dedent(inspect.getsource(kind))).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
        ):
            docs[node.target.id] = " ".join(str(following.value.value).split())
    return docs

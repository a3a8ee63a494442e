"""The errors the project raises, under one base class: ``except quarto_env.QuartoError`` catches any of them
and nothing else (a bug's ``KeyError`` or ``AttributeError`` still shows as one).

Each is also the built-in error it is a kind of -- a bad value a ``ValueError``, a value of the wrong type a
``TypeError``, a call out of order a ``RuntimeError`` -- so code that catches those keeps working::

    QuartoError
    ├── QuartoValueError (ValueError)      an argument outside its allowed values
    │   ├── RulesError                     a rule variant, a position or an action the rules do not allow
    │   │   ├── IllegalActionError         an action that is not legal now, or outside the action space
    │   │   │   └── ActionTypeError (TypeError)  an action that is not an integer (None, a float, a string)
    │   │   └── PositionError              a malformed position string, or one no game can start from
    │   ├── SpecError                      an agent spec that names no known kind or option
    │   ├── CheckpointError                a checkpoint that is missing, unreadable or for other rules
    │   └── DatasetError                   a file that is not a dataset of this format, or altered
    ├── QuartoTypeError (TypeError)        an argument of the wrong type
    └── CallOrderError (RuntimeError)      a call the env's state does not allow now (``step`` before ``reset``,
                                           ``last`` after the game is over)

The classes live here, on the ground floor, although agents and experiments raise some of them: so
``import quarto_env`` exports all of them without importing those packages (``agents.specs.SpecError`` is
``quarto_env.SpecError``). Standard library only.
"""

from __future__ import annotations


class QuartoError(Exception):
    """The base class of every error this project raises on purpose."""


class QuartoValueError(QuartoError, ValueError):
    """An argument outside its allowed values; the message names it and what is allowed."""


class QuartoTypeError(QuartoError, TypeError):
    """An argument of the wrong type; the message names it and the types allowed."""


class CallOrderError(QuartoError, RuntimeError):
    """A call that the object's state does not allow now, such as ``step()`` before ``reset()`` or ``last()``
    once the game is over; the message says what to call first."""


class RulesError(QuartoValueError):
    """A rule variant, a position or an action that the rules do not allow."""


class IllegalActionError(RulesError):
    """An action that is not legal in the current state, or that is outside the action space."""


class ActionTypeError(IllegalActionError, TypeError):
    """An action that is not a Python or numpy integer (``None`` for an agent still playing, a float, a string,
    a bool), which would otherwise be read as some other action."""


class PositionError(RulesError):
    """A malformed position string, or a position that no game can start from."""


class SpecError(QuartoValueError):
    """An agent spec that names no known kind or option."""


class CheckpointError(QuartoValueError):
    """A checkpoint that is missing, unreadable, or made for another rule variant."""


class DatasetError(QuartoValueError):
    """A file that is not a dataset of this format, or whose arrays do not match its hash."""


class EvaluationError(QuartoValueError):
    """An evaluation handed to a search session (:mod:`agents.tree.sessions`) that the search cannot use: logits or
    values of the wrong shape or type, or not finite -- or an evaluator that raised (its error the cause) or returned
    no ``(logits, values)`` pair; the message, one line, names the batch and what is wrong."""

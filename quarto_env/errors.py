"""The errors the project raises, under one base class: ``except quarto_env.QuartoError`` catches any of them
and nothing else (a bug's ``KeyError`` or ``AttributeError`` still shows as one).

Each is also the built-in error it is a kind of -- a bad value a ``ValueError``, a value of the wrong type a
``TypeError``, a call out of order a ``RuntimeError`` -- so code that catches those keeps working. Every error
class of ``quarto_env``, ``agents`` and ``experiments`` is in this tree (``tests/test_error_contract.py`` reads it
and checks each class's parents against it); ``[module]`` names the home of the few that live elsewhere::

    QuartoError
    ├── QuartoValueError (ValueError)      an argument outside its allowed values
    │   ├── RulesError                     a rule variant, a position or an action the rules do not allow
    │   │   ├── IllegalActionError         an action that is not legal now, or outside the action space
    │   │   │   └── ActionTypeError (TypeError)  an action that is not an integer (None, a float, a string)
    │   │   └── PositionError              a malformed position string, or one no game can start from
    │   ├── SpecError                      an agent spec that names no known kind or option
    │   ├── CheckpointError                a checkpoint that is missing, unreadable or for other rules
    │   │   └── DamagedCheckpointError     one whose bytes are not those written (truncated, corrupt)
    │   ├── DatasetError                   a file that is not a dataset of this format, or altered
    │   ├── EvaluationError                an evaluation handed to a search session that it cannot use
    │   ├── IntegrityError                 a sealed file or object that fails its check
    │   ├── OutputPathError                a path named for output that cannot be written as asked
    │   │   └── InUseError                 an output whose lock another writer holds
    │   ├── BookError                      an opening book file that cannot be used
    │   ├── TableFileError                 a saved transposition table that cannot be used
    │   ├── SuiteError                     a test suite that cannot be used
    │   ├── RecordError                    a game record that cannot be read or replayed
    │   ├── RatingError                    games that do not determine the ratings
    │   ├── ConfigError                    a training config with an unknown key, a wrong type or value
    │   │   └── RayStartError              a Ray address that is malformed or unreachable
    │   └── SweepError                     a sweep that cannot run as asked
    ├── QuartoTypeError (TypeError)        an argument of the wrong type
    ├── CallOrderError (RuntimeError)      a call the env's state does not allow now (``step`` before ``reset``,
    │                                      ``last`` after the game is over)
    ├── SamplingError (RuntimeError)       too few positions found in the games played to sample as many as asked
    ├── ThreadsError (RuntimeError)        threads asked for where they cannot start (a forked process)
    ├── MissingExtra (ImportError)         a feature whose extra is not installed
    └── OutputError                        an output a command cannot claim or write  [experiments.output]
        ├── OutputExistsError              the output holds a result, and no --overwrite  [experiments.output]
        ├── OutputInUseError               another process holds the output's lock  [experiments.output]
        └── OutputWriteError               a write into the output failed late  [experiments.output]

The classes live here, on the ground floor, although agents and experiments raise most of them: so
``import quarto_env.errors`` gives all of them without importing those packages, and the module that raises
one re-exports it under its old name (``agents.specs.SpecError`` is ``quarto_env.SpecError``). The
``OutputError`` family stays in :mod:`experiments.output`: each carries the command's exit status
(``experiments.options.USAGE_ERROR``, ``WRITE_FAILED``), a fact of the command line that the ground floor does
not know.

Not errors but signals: each stops a loop and is caught by the code it leaves (or is Ctrl-C itself), so none is
a ``QuartoError`` and each lives beside the code that raises it::

    AlphaBetaInterrupted (KeyboardInterrupt)  Ctrl-C stopped a compiled search  [agents.solver.alphabeta]
    TrainingInterrupted (Exception)           Ctrl-C stopped quarto train  [experiments.training.train]
    RunFinished (Exception)                   a resume with nothing left to train  [experiments.training.run]
    QuitGame (Exception)                      the player of quarto play quit  [experiments.arena.play]
    TooManyValues (yaml.YAMLError)            a YAML bomb, refused as bad YAML  [experiments.training.config_file]

Standard library only.
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


class SamplingError(QuartoError, RuntimeError):
    """Too few positions of the kind asked for in the games played to sample as many as asked (a count too large
    for the sources or the stage); the message says how many were found in how many games."""


class ThreadsError(QuartoError, RuntimeError):
    """Threads asked for where they cannot start: a batched step on threads in a process forked from one that
    already ran such steps on numba's OpenMP layer, which would end the process; the message says what to do."""


def install_command(extra: str) -> str:
    """How to install ``extra``, from the package index and from a checkout: every hint says it so."""
    return f"pip install 'quarto-env[{extra}]' (from a checkout: pip install -e '.[{extra}]')"


class MissingExtra(QuartoError, ImportError):
    """A feature needs an extra that is not installed; ``str(error)`` is the one line to print
    (:mod:`quarto_env.extras`)."""

    def __init__(self, purpose: str, extra: str, module: str) -> None:
        self.extra = extra
        super().__init__(
            f"{purpose} needs the '{extra}' extra ({module} is not installed): {install_command(extra)}", name=module
        )


class RulesError(QuartoValueError):
    """A rule variant, a position or an action that the rules do not allow."""


class IllegalActionError(RulesError):
    """An action that is not legal in the current state, or that is outside the action space."""


class ActionTypeError(IllegalActionError, TypeError):
    """An action that is not a Python or numpy integer or a 0-d integer array (``None`` for an agent still
    playing, a float, a string, a bool), which would otherwise be read as some other action."""


class PositionError(RulesError):
    """A malformed position string, or a position that no game can start from."""


class SpecError(QuartoValueError):
    """An agent spec that names no known kind or option."""


class CheckpointError(QuartoValueError):
    """A checkpoint that is missing, unreadable, or made for another rule variant."""


class DamagedCheckpointError(CheckpointError):
    """A checkpoint whose bytes are not those written: truncated, corrupt, or its entries not those its seal
    proves. (A checkpoint that is whole but wrong -- another run's, metadata of the wrong shape -- is a plain
    :class:`CheckpointError`.)"""


class DatasetError(QuartoValueError):
    """A file that is not a dataset of this format, or whose arrays do not match its hash."""


class EvaluationError(QuartoValueError):
    """An evaluation handed to a search session (:mod:`agents.tree.sessions`) that the search cannot use: logits or
    values of the wrong shape or type, or not finite -- or an evaluator that raised (its error the cause) or returned
    no ``(logits, values)`` pair; the message, one line, names the batch and what is wrong."""


class IntegrityError(QuartoValueError):
    """A sealed file or object that fails its check (:mod:`agents.storage.integrity`); the message, one line,
    names it and what failed."""


class OutputPathError(QuartoValueError):
    """A path named for output that cannot be written as asked (:mod:`agents.storage.files`)."""


class InUseError(OutputPathError):
    """An output whose lock another writer holds (:func:`agents.storage.files.hold_lock`)."""


class BookError(QuartoValueError):
    """A book file that cannot be used: missing, damaged, outdated or for another rule variant
    (:mod:`agents.solver.book`)."""


class TableFileError(QuartoValueError):
    """A saved table that cannot be used: missing, damaged, another format or another rule variant
    (:mod:`agents.solver.table_files`)."""


class SuiteError(QuartoValueError):
    """A suite that cannot be used: an unknown name, a damaged or outdated file, or another rule variant's
    (:mod:`agents.suites`)."""


class RecordError(QuartoValueError):
    """A game record that cannot be read or replayed (:mod:`experiments.arena.records`)."""


class RatingError(QuartoValueError):
    """Games that do not determine the ratings (unknown anchor, agents not connected by games)
    (:mod:`experiments.evaluation.ratings`)."""


class ConfigError(QuartoValueError):
    """A config with an unknown key, a wrong type or an impossible value
    (:mod:`experiments.training.config_checks`)."""


class RayStartError(ConfigError):
    """A Ray address that is malformed or unreachable, or a Ray that cannot start: one line, no traceback
    (:mod:`experiments.training.ray_runtime`)."""


class SweepError(QuartoValueError):
    """A sweep that cannot run as asked: a bad setting, address or folder (:mod:`experiments.training.sweep`)."""

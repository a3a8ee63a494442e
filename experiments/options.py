"""The command line every ``quarto`` command shares: its parser (:class:`CommandParser`: defaults shown in
``--help``, the usage only for syntax errors, a refusal in one line) and the options that several commands take,
each spelled and checked once -- ``--out``, ``--no-progress``, the rule-variant flags, numbers with their ranges,
seeds, ``--jobs``, agent specs and input files.

What is not the command line lives where it is used: an output path is refused by :mod:`experiments.output`, the
Markdown tables of reports are :mod:`experiments.evaluation.tables`, the options of the commands that grade
:mod:`experiments.evaluation.arguments`, a config's field docs :mod:`experiments.training.field_docs`, and the
quieting of Ray's loggers :mod:`experiments.training.ray_runtime`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypedDict, TypeVar

from agents.base import Agent
from agents.match import DEFAULT_OPENING_PLIES, MAX_OPENING_PLIES
from agents.specs import SpecError, make_agent, parse_spec
from agents.storage.files import input_file
from quarto_env.checks import describe_range, number_parser
from quarto_env.core import ATTRIBUTES, FALSE_DECLARATION_POLICIES, NUM_SQUARES, RulesError, Variant
from quarto_env.observation import DEFAULT_OBSERVATION, OBSERVATION_KINDS

if TYPE_CHECKING:  # typing.Unpack is Python 3.11's
    from typing_extensions import Unpack

USAGE_ERROR = 2
"""The exit status of every refusal, a syntax error or a value the command cannot use (argparse's own)."""


# ---------------------------------------------------------------------------------------------------------
# argparse types: a bad value is one line naming the option and what it allows
# ---------------------------------------------------------------------------------------------------------
class NumberLimits(TypedDict, total=False):
    """What a number option allows, as :func:`number_parser` takes it: at least ``minimum``, more than ``above``,
    at most ``maximum``, and an integer with ``integer``."""

    minimum: float | None
    above: float | None
    maximum: float | None
    integer: bool


def number_argument(name: str, **limits: Unpack[NumberLimits]) -> NumberArgument:
    """:func:`number_parser` as an argparse ``type=`` that shows its whole message ("argument --delay: delay must
    be a finite number > 0, got 'nan'"; for a plain ``ValueError`` argparse prints only "invalid delay value"),
    and whose range ``--help`` shows."""
    return NumberArgument(name, limits)


class NumberArgument:
    """The argparse ``type=`` of a number option (:func:`number_argument`): called on the text, the checked
    number; ``limits`` are its bounds, and ``allowed`` its range in words (``an integer >= 1 and <= 64``), which
    ``--help`` shows."""

    def __init__(self, name: str, limits: NumberLimits) -> None:
        self._parse = argument_type(number_parser(name, **limits))
        self.__name__ = name  # what argparse names a type by
        self.limits = limits
        self.allowed = describe_range(
            limits.get("minimum"), limits.get("above"), limits.get("maximum"), limits.get("integer", False)
        )

    def __call__(self, text: str) -> float:
        return self._parse(text)


_Parsed = TypeVar("_Parsed")


def refuse_unused(parser: argparse.ArgumentParser, args: argparse.Namespace, needed: str, *options: str) -> None:
    """One line and exit 2 when one of ``options`` (as typed: ``--jobs``) was given a value other than its
    default where ``needed`` (said in the line: ``--grade``) is missing, so that it would do nothing: a silent
    no-op hides a mistake in the command line."""
    for option in options:
        dest = option.lstrip("-").replace("-", "_")
        if getattr(args, dest) != parser.get_default(dest):
            parser.error(f"{option} is used only with {needed}")


def argument_type(parse: Callable[[str], _Parsed]) -> Callable[[str], _Parsed]:
    """``parse`` raising ``argparse.ArgumentTypeError`` for its ``ValueError``: argparse prints that message as
    it is, after the option's name."""

    def parse_argument(text: str) -> _Parsed:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse_argument


def plain_text(text: str) -> str:
    """``text`` without the reStructuredText of the docstrings it may come from (double backquotes around code,
    roles such as ``:func:``): ``--help`` prints it as it is."""
    return _ROLE.sub(r"\1", text).replace("``", "").replace("`", "")


_ROLE = re.compile(r":\w+:`~?([^`]+)`")
"""A reStructuredText role, ``:func:`name```: the name stays."""


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` with each option's range and default after its help, ``(an integer >= 1 and <= 64; default:
    1)``: the range of a number option (:func:`number_argument`), and the default where the option has one to
    show (not ``None``, an empty list or a flag's ``False``) and its help does not already say what its default
    is (a default of ``None`` that means something, "default runs/NAME__TIME", is written out in the help)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = plain_text(action.help or "")
        default = action.default
        shown = action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE)
        nothing = default is None or default is False or default == argparse.SUPPRESS or default in ([], ())
        facts = [action.type.allowed] if isinstance(action.type, NumberArgument) else []
        if shown and not nothing and "default" not in text.lower():
            values = default if isinstance(default, (list, tuple)) else [default]
            facts.append(f"default: {' '.join(map(_shown_value, values))}")
        if not facts:
            return text
        return f"{text} ({'; '.join(facts).replace('%', '%%')})".lstrip()


def _shown_value(value: object) -> str:
    """``value`` as ``--help`` shows a default: a whole float without its ``.0`` (``60``, not ``60.0``)."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class CommandParser(argparse.ArgumentParser):
    """The parser of every ``quarto`` command. Its ``--help`` shows the defaults and the range of each number
    (:class:`DefaultsHelpFormatter`), and no markup (:func:`plain_text`); it takes no abbreviated option
    (``--resum`` is no ``--resume``: a later option of the same start would change what an old command line means).
    A syntax error that argparse finds while it parses -- an unknown option, a missing argument or value --
    prints the usage and the problem, as argparse does. A value the command cannot use prints one line, ``PROG:
    problem``, without the usage, which would only bury it: one that argparse refuses while it parses (a
    ``type=`` that refuses it, an invalid choice, listed with the allowed ones), and a refusal after parsing,
    ``parser.error(...)`` (a bad agent spec, a missing file, an odd ``--games``). Both exit with status
    :data:`USAGE_ERROR`.

    Why it overrides two private methods of argparse, ``_get_value`` and ``_check_value``: argparse has no public
    way to tell a refused value from a syntax error. Both reach :meth:`error` as one message, and with
    ``exit_on_error=False`` both are the same ``ArgumentError`` ("expected one argument" as "invalid choice").
    The two overrides only note that a value was refused and re-raise, so argparse's own parsing is unchanged;
    ``tests/test_checks.py`` fails if a Python release renames them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsHelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        for text in ("description", "epilog"):  # often a module docstring's first paragraph
            if kwargs.get(text):
                kwargs[text] = plain_text(kwargs[text])
        super().__init__(*args, **kwargs)
        self._parsing = False
        self._bad_value = False

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Within the block, the command line is being read: an error is a syntax error unless a value was
        refused (:meth:`_get_value`, :meth:`_check_value`). The parse methods call each other: the outer one
        counts."""
        parsing, self._parsing = self._parsing, True
        if not parsing:
            self._bad_value = False
        try:
            yield
        finally:
            self._parsing = parsing

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # parse_args calls this and then reports unknown arguments itself: both count as parsing.
        with self._reading():
            return super().parse_known_args(args, namespace)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        with self._reading():
            return super().parse_args(args, namespace)

    def parse_intermixed_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        with self._reading():
            return super().parse_intermixed_args(args, namespace)

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            if action.type is Path and not arg_string:  # Path("") is ".", the current folder: never what was meant
                raise argparse.ArgumentError(action, "'' is an empty path: name a file or folder")
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError:
            self._bad_value = True
            raise

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        try:
            super()._check_value(action, value)
        except argparse.ArgumentError:
            self._bad_value = True
            raise

    def error(self, message: str) -> NoReturn:
        if self._parsing and not self._bad_value:
            super().error(message)
        refuse(self.prog, message)


def refuse(prog: str, message: str, status: int = USAGE_ERROR) -> NoReturn:
    """Print ``PROG: message`` (one line) on stderr and exit with ``status``: the one form of a command's refusal
    of a value it cannot use (:data:`USAGE_ERROR`), and of an output it could not write."""
    print(f"{prog}: {message}", file=sys.stderr)
    raise SystemExit(status)


def add_out_argument(parser: argparse.ArgumentParser, *old_spellings: str, **kwargs: Any) -> None:
    """Add ``--out``, the one name of the output file or folder of every command that writes one (``dest``
    ``out``); ``old_spellings`` (``-o``, ``--output``, ``--run-dir``) are still accepted, and the help lists
    them after ``--out``."""
    parser.add_argument("--out", *old_spellings, dest="out", **kwargs)


def add_progress_argument(parser: argparse.ArgumentParser, what: str = "progress bar") -> None:
    """Add ``--no-progress`` (``dest`` ``no_progress``): every command that shows its progress on stderr (a bar,
    or the ``what`` it shows) takes it, also those that show it only with some options."""
    parser.add_argument("--no-progress", action="store_true", help=f"show no {what} on stderr")


def add_variant_arguments(parser: argparse.ArgumentParser, several_words: bool = False) -> None:
    """Add ``--attributes``, ``--squares``, ``--declaration`` and ``--false-declaration`` to ``parser``: the one
    spelling of the rule variant of every command that takes one. ``--attributes`` takes a count 1-4 or names
    joined by commas (``colour,shape``); with ``several_words`` (commands whose positional arguments come
    first, such as ``solve``) also names as separate words (``colour shape``). Commands that take a list of
    agents after their options keep one word, so that ``--attributes colour random greedy`` reads two agents."""
    group = parser.add_argument_group("rule variant (default: standard Quarto)")
    names = f"names among {','.join(ATTRIBUTES)}"
    group.add_argument(
        "--attributes",
        nargs="+" if several_words else None,
        type=_attribute_word,
        default=None,
        metavar="A",
        help=f"attributes that count for a win: a count 1-4, or {names} joined by commas"
        + (" or given as separate words" if several_words else "")
        + " (default: all)",
    )
    group.add_argument("--squares", action="store_true", help="the 2x2 blocks are groups too (advanced variant)")
    group.add_argument("--declaration", action="store_true", help='a win must be declared ("Quarto!")')
    group.add_argument(
        "--false-declaration",
        choices=FALSE_DECLARATION_POLICIES,
        default="lose",
        help="with --declaration: what a declaration with nothing to claim does",
    )


def add_progress_and_variant_arguments(
    parser: argparse.ArgumentParser, progress: str = "progress bar", several_words: bool = False
) -> None:
    """The options that end the parser of a command that plays under a rule variant and shows its progress:
    ``--no-progress`` (hiding ``progress``, :func:`add_progress_argument`), then the rule-variant flags
    (:func:`add_variant_arguments`, with ``several_words``)."""
    add_progress_argument(parser, progress)
    add_variant_arguments(parser, several_words)


def parse_command(
    build_parser: Callable[[], argparse.ArgumentParser], argv: Sequence[str]
) -> tuple[argparse.ArgumentParser, argparse.Namespace, Variant]:
    """The preamble of a command that takes the rule-variant flags: its parser (from ``build_parser``), ``argv``
    parsed, and the variant the flags name; a syntax error or a variant the rules refuse exits with status
    :data:`USAGE_ERROR` (:func:`variant_from_args`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return parser, args, variant_from_args(parser, args)


MAX_JOBS = 64
"""The most worker processes (or solver threads) a command's ``--jobs`` takes."""
MAX_CHECKPOINT_SECONDS = 24 * 3600
"""The longest ``--checkpoint-every``, the seconds between two saves of a long computation's state: a day."""


def add_number_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    option: str,
    default: Any,
    help: str | None = None,
    *,
    name: str | None = None,
    nargs: str | None = None,
    metavar: str | None = None,
    **limits: Unpack[NumberLimits],
) -> None:
    """Add the number option ``option`` (``--positions``), checked within ``limits`` (:func:`number_argument`:
    a bad value is one line naming ``name``, by default the option without its dashes; ``--help`` shows the range
    and ``default``); ``nargs`` and ``metavar`` as argparse takes them."""
    kind = number_argument(name or option.lstrip("-"), **limits)
    parser.add_argument(option, type=kind, nargs=nargs, default=default, metavar=metavar, help=help)


def add_integer_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    option: str,
    default: Any,
    help: str | None = None,
    *,
    fewest: int,
    most: int | None,
    name: str | None = None,
    nargs: str | None = None,
    metavar: str | None = None,
) -> None:
    """Add the integer option ``option``, from ``fewest`` to ``most`` (``None``: no upper bound), as
    :func:`add_number_argument` adds a number: the most common number option, a count."""
    limits: NumberLimits = {"minimum": fewest, "maximum": most, "integer": True}
    add_number_argument(parser, option, default, help, name=name, nargs=nargs, metavar=metavar, **limits)


def add_jobs_argument(parser: argparse.ArgumentParser, help: str | None = None, default: int = 1) -> None:
    """Add ``--jobs``: the worker processes that share a command's work, 1 to :data:`MAX_JOBS`, ``default`` 1
    unless said (:func:`all_cores` for a command that uses them all unasked)."""
    add_integer_argument(parser, "--jobs", default, help, fewest=1, most=MAX_JOBS)


def all_cores() -> int:
    """The cores of this machine, at most :data:`MAX_JOBS`: the default ``--jobs`` of a command that uses them all."""
    return min(os.cpu_count() or 1, MAX_JOBS)


def capped_jobs(parser: argparse.ArgumentParser | None, jobs: int) -> int:
    """``jobs``, or the number of cores if that is fewer (with a warning when ``parser`` is given): more worker
    processes than cores only add memory and slow each one."""
    cores = os.cpu_count() or 1
    if jobs <= cores:
        return jobs
    if parser is not None:
        warn(parser, f"--jobs {jobs} is more than the {cores} cores of this machine; using {cores}")
    return cores


def add_opening_plies_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """Add ``--opening-plies``: the random actions that open each pair of games, the same for both seatings
    (:func:`agents.match.random_opening`), 0 to :data:`~agents.match.MAX_OPENING_PLIES`, default
    :data:`~agents.match.DEFAULT_OPENING_PLIES` for every command that plays such pairs."""
    add_integer_argument(parser, "--opening-plies", DEFAULT_OPENING_PLIES, help, fewest=0, most=MAX_OPENING_PLIES)


def add_empty_squares_argument(
    parser: argparse.ArgumentParser,
    option: str,
    default: int | None,
    help: str,
    fewest: int = 1,
    name: str | None = None,
) -> None:
    """Add ``option`` (``--min-empty`` or ``--max-empty``): a bound on the empty squares of the positions a command
    works on, an integer from ``fewest`` to 16; a bad value is refused with a message naming ``name`` (default:
    the option without its dashes)."""
    add_integer_argument(parser, option, default, help, fewest=fewest, most=NUM_SQUARES, name=name)


def add_observation_argument(parser: argparse.ArgumentParser, help: str, default: str = DEFAULT_OBSERVATION) -> None:
    """Add ``--observation``: one of the observation kinds (:data:`quarto_env.observation.OBSERVATION_KINDS`),
    the planes a command's env or networks read; ``default`` is the env's own unless the command says otherwise."""
    parser.add_argument("--observation", choices=list(OBSERVATION_KINDS), default=default, help=help)


def check_specs(parser: argparse.ArgumentParser, specs: list[str]) -> None:
    """Exit with a usage error naming the first spec that names no known agent kind or option."""
    for spec in specs:
        try:
            parse_spec(spec)
        except SpecError as error:
            parser.error(str(error))


def agent_or_exit(parser: argparse.ArgumentParser, spec: str, variant: Variant, seed: int | None) -> Agent:
    """``make_agent(spec, variant, seed)``; a bad spec or an agent that cannot be built (a missing checkpoint)
    exits with a usage error naming the problem."""
    try:
        return make_agent(spec, variant, seed)
    except (SpecError, ValueError, OSError) as error:
        parser.error(f"agent {spec!r} cannot be built: {error}")


def variant_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Variant:
    """The variant named by the flags of :func:`add_variant_arguments`; a value the rules refuse (an unknown
    attribute, ``--false-declaration penalty`` without ``--declaration``) exits with a one-line usage error."""
    try:
        return Variant.make(_attributes(args.attributes), args.squares, args.declaration, args.false_declaration)
    except RulesError as error:
        parser.error(str(error))


def _attributes(words: list[str] | str | None) -> int | str | None:
    """What the word(s) of ``--attributes`` name: ``None`` (all), a count, or attribute names joined by commas
    (an empty one, ``colour,,shape``, is for ``Variant.make`` to refuse)."""
    if words is None:
        return None
    if isinstance(words, str):
        words = [words]
    if len(words) == 1 and words[0].strip().isdecimal():
        return int(words[0])
    return ",".join(words)


def _attribute_word(word: str) -> str:
    """One word of ``--attributes``, checked alone: a bad one is named at once, also when it is a positional
    argument that the list swallowed (argparse would only say that the positional is missing)."""
    try:
        Variant.make(_attributes([word]))
    except RulesError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return word


MAX_SEED = 2**32 - 1
"""The largest seed of the arena commands: numpy's legacy range, as for ``quarto train``."""


SEED = number_argument("seed", minimum=0, maximum=MAX_SEED, integer=True)
"""The argparse ``type=`` of ``--seed``."""


def add_seed_argument(parser: argparse.ArgumentParser, help: str, default: int | None = 0) -> None:
    """Add ``--seed``: an integer from 0 to :data:`MAX_SEED` (:data:`SEED`), ``default`` 0 unless said (``None``:
    none given)."""
    parser.add_argument("--seed", type=SEED, default=default, help=help)


def input_file_or_exit(parser: argparse.ArgumentParser, path: Path, what: str) -> Path:
    """``path`` checked as a regular file to read (:func:`agents.storage.files.input_file`); a missing file, a folder, a
    named pipe or a device exits with a usage error naming ``what``."""
    try:
        return input_file(path, what)
    except ValueError as error:
        parser.error(str(error))


def warn(parser: argparse.ArgumentParser, message: str) -> None:
    """Print ``PROG: warning: message`` on stderr: something the user should know, that does not stop the run."""
    print(f"{parser.prog}: warning: {message}", file=sys.stderr)

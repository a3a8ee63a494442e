"""How the sessions of :mod:`agents.tree.sessions` fail (issue 50): every evaluator failure is one
:class:`EvaluationError` naming the batch, after which the batch can be submitted again; a submit is tied to the
batch the caller was handed; an exception inside the search stops the session loudly, never as ``done``; and
every argument -- the variant, the seed, the model version, the counts -- is checked before anything is
allocated. The happy paths are tests/test_sessions.py's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from agents.tree.puct import PUCTSearch
from agents.tree.sessions import (
    ArenaSession,
    LeafBatch,
    PUCTOptions,
    PUCTSession,
    SelfPlaySession,
)
from quarto_env.core import INITIAL_STATE, NUM_ACTIONS, STANDARD, Variant, position_array
from quarto_env.errors import CallOrderError, EvaluationError, QuartoTypeError, QuartoValueError, RulesError
from quarto_env.notation import parse_position
from quarto_env.observation import OBSERVATION_KINDS

FEW = PUCTOptions(simulations=4)


def uniform(batch: LeafBatch) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((len(batch), NUM_ACTIONS), np.float32), np.zeros(len(batch), np.float32)


def one_line_error(error: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


# ---------------------------------------------------------------------------------------------------------
# Evaluator failures: one EvaluationError naming the batch, and the same batch evaluated again
# ---------------------------------------------------------------------------------------------------------
def _raises(batch: LeafBatch) -> Any:
    raise ZeroDivisionError("division by zero")


BROKEN_EVALUATORS: dict[str, tuple[Callable[[LeafBatch], Any], str]] = {
    "raises": (_raises, r"the evaluator raised ZeroDivisionError \(division by zero\)"),
    "returns None": (lambda batch: None, r"must return a pair \(logits, values\), got None"),
    "returns a 3-tuple": (lambda batch: (*uniform(batch), 0), "got a tuple of 3"),
    "returns a dict": (lambda batch: dict(zip(("logits", "values"), uniform(batch), strict=True)), "got a dict"),
    "returns one array": (lambda batch: uniform(batch)[0], "got an ndarray"),
    "returns integer logits": (lambda batch: (uniform(batch)[0].astype(np.int64), uniform(batch)[1]), "int64"),
    "returns NaN values": (lambda batch: (uniform(batch)[0], np.full(len(batch), np.nan)), "values must be finite"),
    "returns (values, logits)": (lambda batch: uniform(batch)[::-1], "logits must have shape"),
}


@pytest.mark.parametrize("name", list(BROKEN_EVALUATORS))
def test_an_evaluator_failure_names_the_batch_and_the_batch_can_be_evaluated_again(name: str) -> None:
    evaluator, message = BROKEN_EVALUATORS[name]
    session = SelfPlaySession(2, FEW, seed=0)
    session.submit(*uniform(session.pending()))  # batch 0; the failure comes at batch 1
    with pytest.raises(EvaluationError, match=rf"^batch 1 \(model 0, 2 leaves\): .*{message}") as error:
        session.run(evaluator)
    one_line_error(error)
    batch = session.pending()
    assert batch.index == 1 and len(batch.legal) == 2  # still pending, still readable
    session.submit(*uniform(batch), batch=batch)
    assert len(session.run(uniform).games) == 2


def test_an_evaluator_error_keeps_its_cause_and_an_interrupt_stays_an_interrupt() -> None:
    with pytest.raises(EvaluationError) as error:
        SelfPlaySession(1, FEW, seed=0).run(_raises)
    assert isinstance(error.value.__cause__, ZeroDivisionError)

    def interrupted(batch: LeafBatch) -> Any:
        if batch.index == 3:
            raise KeyboardInterrupt
        return uniform(batch)

    session = SelfPlaySession(3, FEW, seed=0)
    with pytest.raises(KeyboardInterrupt):  # not wrapped: Ctrl-C stays Ctrl-C, and the batch stays pending
        session.run(interrupted)
    assert not session.done and session.pending().index == 3
    assert len(session.run(uniform).games) == 3


def test_play_round_reports_an_evaluator_failure_and_goes_on_after_it() -> None:
    session = SelfPlaySession(None, FEW, seed=0, parallel=2, records=False)
    with pytest.raises(EvaluationError, match=r"^batch 0 "):
        session.play_round(lambda batch: None)
    assert session.play_round(uniform) is not None and session.rounds == 1


# ---------------------------------------------------------------------------------------------------------
# A submit is tied to its batch
# ---------------------------------------------------------------------------------------------------------
def test_a_second_submit_for_one_batch_is_refused_and_lands_nowhere() -> None:
    session = SelfPlaySession(2, FEW, seed=0)
    first = session.pending()
    session.submit(*uniform(first))
    with pytest.raises(CallOrderError, match="batch 0 is submitted already: call pending"):
        session.submit(*uniform(first))
    assert session.batches == 2  # the next batch exists, unseen by the caller and untouched
    second = session.pending()
    assert second.index == 1 and second.legal.any(1).all()
    session.submit(*uniform(second), batch=second)
    assert session.pending().index == 2


def test_a_submit_names_its_batch_by_the_batch_or_its_index() -> None:
    session = SelfPlaySession(2, FEW, seed=0)
    stale = session.pending()
    session.submit(*uniform(stale), batch=stale)
    batch = session.pending()
    with pytest.raises(CallOrderError, match=r"the evaluation is for batch 0, but the pending batch is batch 1"):
        session.submit(*uniform(batch), batch=stale)
    with pytest.raises(CallOrderError, match="batch 7"):
        session.submit(*uniform(batch), batch=7)
    other = SelfPlaySession(2, FEW, seed=0)
    other.submit(*uniform(other.pending()))
    with pytest.raises(CallOrderError, match="batch 1 of another session"):
        session.submit(*uniform(batch), batch=other.pending())
    with pytest.raises(QuartoTypeError, match="batch must be the LeafBatch that pending"):
        session.submit(*uniform(batch), batch="1")
    session.submit(*uniform(batch), batch=np.int64(1))
    assert session.pending().index == 2


def test_a_batch_the_caller_was_not_handed_takes_no_evaluation() -> None:
    session = SelfPlaySession(1, FEW, seed=0)
    assert not session.done  # asking plays on to batch 0, but does not hand it out
    with pytest.raises(CallOrderError, match="no batch is pending: call pending"):
        session.submit(np.zeros((1, 16)), np.zeros(1))
    session.run(uniform)
    with pytest.raises(CallOrderError, match="submitted already"):
        session.submit(np.zeros((1, 16)), np.zeros(1))


# ---------------------------------------------------------------------------------------------------------
# An exception inside the search: the next use raises, never a silent end
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("failure", [KeyboardInterrupt, MemoryError])
def test_a_failure_inside_the_search_makes_the_next_use_raise(
    failure: type[BaseException], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = SelfPlaySession(4, FEW, seed=0, parallel=2)
    session.run(uniform)  # warm: the kernels compiled
    session = SelfPlaySession(4, FEW, seed=0, parallel=2)
    steps = {"n": 0}
    step = session._step

    def failing_step(slots: np.ndarray, actions: np.ndarray) -> None:
        steps["n"] += 1
        if steps["n"] == 12:  # some games finished by now
            raise failure()
        step(slots, actions)

    monkeypatch.setattr(session, "_step", failing_step)
    with pytest.raises(failure):
        session.run(uniform)
    uses = (lambda: session.done, session.pending, lambda: session.run(uniform), lambda: session.play_round(uniform))
    for use in uses:
        with pytest.raises(CallOrderError, match=f"cannot go on: {failure.__name__} stopped its search") as error:
            use()
        one_line_error(error)
    with pytest.raises(CallOrderError, match="cannot go on"):
        session.submit(np.zeros((2, 16)), np.zeros(2))


def test_a_failure_inside_the_search_keeps_what_was_finished(monkeypatch: pytest.MonkeyPatch) -> None:
    session = SelfPlaySession(4, FEW, seed=0, parallel=2)
    finish = session._finish

    def failing_finish(slot: int, winner: int) -> None:
        finish(slot, winner)
        if session.finished == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(session, "_finish", failing_finish)
    with pytest.raises(KeyboardInterrupt):
        session.run(uniform)
    with pytest.raises(CallOrderError):
        session.done  # noqa: B018 -- a property that plays on
    assert session.finished == 2 and len(set(session.samples().game.tolist())) == 2


# ---------------------------------------------------------------------------------------------------------
# Arguments checked when given
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", ["v2", -1, 1.5, None, True, 10**16])
def test_model_version_is_checked_when_it_is_set(version: object) -> None:
    session = SelfPlaySession(1, FEW, seed=0)
    with pytest.raises(QuartoValueError, match=r"^model_version must be an integer >= 0") as error:
        session.model_version = version
    one_line_error(error)
    session.model_version = np.int64(3)
    assert (session.run(uniform).samples().model_version == 3).all()


def test_variant_takes_a_variant_a_flags_mapping_or_none() -> None:
    squares = Variant.make(squares=True)
    assert SelfPlaySession(1, FEW, variant={"squares": True}).variant == squares
    assert SelfPlaySession(1, FEW, variant=None).variant == STANDARD
    assert ArenaSession(1, FEW, variant={"attributes": 3}).variant == Variant.make(attributes=3)
    played = SelfPlaySession(1, FEW, seed=0, variant={"squares": True}).run(uniform)
    assert played.samples().variant == squares


@pytest.mark.parametrize(
    ("variant", "error", "message"),
    [
        ("squares", QuartoTypeError, r"variant must be a Variant, a mapping of its flags .* or None, got str"),
        (["squares"], QuartoTypeError, "variant must be a Variant"),
        ({"squarez": True}, QuartoTypeError, "variant has no flag squarez; its flags: attributes, squares"),
        ({"squares": "yes"}, RulesError, r"not a valid rule variant \(squares must be True or False"),
        ({"attributes": 9}, RulesError, "is not a valid rule variant"),
    ],
)
def test_any_other_variant_is_refused_in_one_line(variant: object, error: type[Exception], message: str) -> None:
    for make in (lambda: SelfPlaySession(1, FEW, variant=variant), lambda: ArenaSession(1, FEW, variant=variant)):
        with pytest.raises(error, match=message) as raised:
            make()
        one_line_error(raised)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: SelfPlaySession(2, {"simulations": 4}), QuartoTypeError, "options must be a PUCTOptions"),
        (lambda: SelfPlaySession(2, FEW, seed="abc"), QuartoTypeError, "seed must be an integer >= 0, a numpy"),
        (lambda: SelfPlaySession(2, FEW, seed=-1), QuartoValueError, "seed must be an integer >= 0"),
        (lambda: SelfPlaySession(2, FEW, records="no"), QuartoTypeError, "records must be True or False"),
        (lambda: ArenaSession(1, FEW, names="ab"), QuartoTypeError, "names must be a pair of strings"),
        (lambda: ArenaSession(1, (FEW, {"simulations": 4})), QuartoTypeError, "options must be a PUCTOptions"),
        (lambda: SelfPlaySession(2, FEW).run("network"), QuartoTypeError, "evaluator 0 must be callable"),
    ],
)
def test_arguments_of_the_wrong_kind_are_refused_in_one_line(
    make: Callable[[], object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as raised:
        make()
    one_line_error(raised)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: SelfPlaySession(10**12, FEW), r"num_games, all side by side without parallel, must be .* <= "),
        (lambda: SelfPlaySession(None, FEW, parallel=10**12), r"parallel must be an integer >= 1 and <= [\d,]+ here"),
        (lambda: SelfPlaySession(4, PUCTOptions(simulations=10**9)), "more than this machine's .* fewer simulations"),
        (lambda: ArenaSession(10**12, FEW), r"num_pairs must be an integer >= 1 and <= [\d,]+ here"),
        (
            lambda: SelfPlaySession(10**16, FEW, parallel=2),
            r"num_games must be an integer >= 1 and <= 1000000000000000",
        ),
    ],
)
def test_counts_are_bounded_before_anything_is_allocated(make: Callable[[], object], message: str) -> None:
    with pytest.raises(QuartoValueError, match=message) as raised:
        make()
    one_line_error(raised)


@pytest.mark.parametrize("kind", list(OBSERVATION_KINDS))
def test_the_bound_counts_every_array_of_the_search(kind: str) -> None:
    search = PUCTSearch(STANDARD, OBSERVATION_KINDS[kind], None, 3, 10)
    allocated = sum(array.nbytes for array in vars(search).values() if isinstance(array, np.ndarray))
    assert allocated == 3 * PUCTSearch.bytes_per_game(OBSERVATION_KINDS[kind], 10)


def test_a_search_session_checks_its_roots_and_options_before_the_search() -> None:
    search = PUCTSearch(STANDARD, OBSERVATION_KINDS["tactical"], None, 2, 8)
    roots = position_array([INITIAL_STATE])
    with pytest.raises(QuartoValueError, match=r"roots must be integer rows .* shape \(n, 8\); got float64"):
        PUCTSession(search, roots.astype(float), 8)
    with pytest.raises(QuartoValueError, match="the number of roots must be an integer >= 1 and <= 2, got 3"):
        PUCTSession(search, np.repeat(roots, 3, axis=0), 8)
    with pytest.raises(QuartoValueError, match=r"sims \(the search's trees hold 8\) must be an integer >= 0 and <= 8"):
        PUCTSession(search, roots, -1)
    with pytest.raises(QuartoValueError, match=r"must be an integer >= 0 and <= 8, got 1000$"):  # not cut to 8
        PUCTSession(search, roots, 1000)
    with pytest.raises(QuartoTypeError, match="unexpected keyword argument 'temperature'"):
        PUCTSession(search, roots, 8, temperature=1.0)
    assert PUCTSession(search, roots, 8).run(uniform).result.visits.sum() == 8


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (position_array([parse_position("0123............ -")])[0], r"root 0 is no position in play .*: it is over$"),
        (np.zeros(8, np.int64), r"it has no valid result fields \(winner, over\)$"),
        (np.full(8, 123456789), r"it has no valid result fields"),
        (np.array([0, 0, 0xFFFF, -1, 1, 0, -1, 0]), r"it has a turn or a phase that its counts .* do not give$"),
        (np.array([0, 1, 0xFFFF, -1, 1, 0, -1, 0]), r"it does not hold each of the 16 pieces once"),  # piece 0 twice
        (
            np.array([0, 0, 0xFFFF, -1, 0, 1, -1, 0]),
            r"it has claimable groups that its rules or its groups do not allow$",
        ),
        (
            position_array([parse_position("012............. 3")])[0],
            r"^root 0 \(012\.{13} 3\) has no choice to search: the rules dictate action 3 \(a claim, a win",
        ),
    ],
    ids=["over", "zeros", "garbage", "turn", "pieces", "claimable", "forced"],
)
def test_a_search_session_refuses_roots_that_are_no_choice_in_play(row: np.ndarray, message: str) -> None:
    """Searched, each of these gave best() == [0] with no visit: an occupied square, a move after the end."""
    search = PUCTSearch(STANDARD, OBSERVATION_KINDS["tactical"], None, 2, 8)
    with pytest.raises(QuartoValueError, match=message) as raised:
        PUCTSession(search, np.stack([row]), 8)
    one_line_error(raised)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ((STANDARD, "pixels", None, 2, 8), QuartoValueError, r"^unknown observation kind 'pixels'"),
        ((STANDARD, "tactical", "net", 2, 8), QuartoTypeError, r"^evaluator must be a callable .* or None, got 'net'$"),
        ((STANDARD, "tactical", None, -1, 8), QuartoValueError, r"^max_games must be an integer >= 1, got -1$"),
        ((STANDARD, "tactical", None, 2, 2.5), QuartoValueError, r"^max_sims must be an integer >= 0, got 2.5$"),
        (({"squares": "yes"}, "tactical", None, 2, 8), RulesError, r"squares"),
    ],
)
def test_a_search_is_refused_bad_arguments_in_one_line(arguments: tuple, error: type, message: str) -> None:
    with pytest.raises(error, match=message) as raised:
        PUCTSearch(*arguments)
    one_line_error(raised)


def test_a_search_takes_a_kind_by_name_and_whole_number_floats() -> None:
    search = PUCTSearch(STANDARD, "tactical", None, 2.0, 8.0)
    assert (search.max_games, search.max_sims, search.kind) == (2, 8, OBSERVATION_KINDS["tactical"])
    assert PUCTSession(search, position_array([INITIAL_STATE]), 8).run(uniform).result.visits.sum() == 8


@pytest.mark.parametrize("targets", ["visits", "completed_q"])
def test_zero_simulations_play_and_label_by_the_prior(targets: str) -> None:
    """0 simulations evaluate the roots alone: the moves sampled (temperature) and the visits targets are the
    prior's, not an all-zero distribution (which played action 15, illegal, and labelled nothing)."""
    options = PUCTOptions(simulations=0, targets=targets)
    samples = SelfPlaySession(4, options, seed=0).run(uniform).samples()
    assert len(samples.policy) > 0 and np.allclose(samples.policy.sum(1), 1.0, atol=1e-5)
    assert not (samples.policy * ~samples.legal).any()
    cheap = PUCTOptions(simulations=4, full_search_share=0.3, cheap_simulations=0)
    assert SelfPlaySession(4, cheap, seed=0).run(uniform).done


def test_whole_number_floats_are_taken_as_the_integers_they_are() -> None:
    options = PUCTOptions(simulations=8.0, temperature_plies=2.0, cheap_simulations=1e3, gumbel_actions=4.0)
    assert (options.simulations, options.temperature_plies, options.cheap_simulations, options.gumbel_actions) == (
        8,
        2,
        1000,
        4,
    )
    assert all(isinstance(value, int) for value in (options.simulations, options.cheap_simulations))
    assert SelfPlaySession(2, options, seed=0).run(uniform).done
    arena = ArenaSession(1, PUCTOptions(simulations=2.0), opening_plies=2.0, seed=0)
    assert arena.run(uniform, uniform).done


# ---------------------------------------------------------------------------------------------------------
# The trainer's counters
# ---------------------------------------------------------------------------------------------------------
def test_take_counters_hands_over_the_counts_and_starts_them_again() -> None:
    session = SelfPlaySession(None, FEW, seed=0, parallel=3, records=False)
    for _ in range(30):
        session.play_round(uniform)
    counters = session.take_counters()
    assert counters.stored_rounds == 30 and counters.cheap_rounds == 0 and counters.simulations > 30 * 3
    assert len(counters.lengths) == len(counters.decisive) > 0 and counters.tree_seconds > 0
    again = session.take_counters()
    assert (again.stored_rounds, again.lengths, again.simulations, again.search_seconds) == (0, [], 0, 0.0)
    assert session.parallel == 3

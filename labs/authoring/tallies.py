"""A rule's count of right units (calls, rank results, world sizes) and what it says, worded one way.

Most rules judge units one by one, note what is wrong with each, and earn the share that is right.
``Tally`` keeps that count and turns it into the ``Outcome``: the first problems in full, how many
more there are, the share right as partial credit. ``bool_rules`` judge a lab whose ranks each
return one bool per call (param-sync, debugging-tools' sync check); ``memory_problem`` a call's
memory high-water against its bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labs.authoring.rules import same_answer_everywhere
from labs.authoring.training import cases_judging
from labs.host.judge import Case, Facts, Outcome, Rule, case_failure, memory_peak, result


def more(count: int, unit: str) -> str:
    """`` (2 more calls like this)`` for ``count`` further problems of ``unit``s; "" for none."""
    return f" ({count} more {unit}{'s' if count > 1 else ''} like this)" if count > 0 else ""


@dataclass
class Tally:
    """The units a rule judged: ``add`` each one's problem (None: right), then ``outcome``.

    ``unit`` names one for "(2 more calls like this)"; ``empty`` is what is said when none ran.
    """

    unit: str = "case"
    empty: str = "no cases were run for this check"
    problems: list[str] = field(default_factory=list)
    advice: str = ""  # the first problem's
    good: int = 0
    total: int = 0

    def add(self, problem: str | None, advice: str = "") -> None:
        """One more unit judged: right when ``problem`` is None; ``advice`` follows it if it is the first."""
        self.total += 1
        if problem is None:
            self.good += 1
            return
        if not self.problems:
            self.advice = advice.strip()
        self.problems.append(problem)

    def outcome(
        self, success: str, data: dict[str, Any] | None = None, *, shown: int = 1, advice: str = "", score: bool = False
    ) -> Outcome:
        """``success`` when every unit is right; else the first ``shown`` problems joined by "; ", how many
        more, the first one's advice then ``advice``, and with ``score`` "[3 of 4 right]". Partial credit:
        the share right."""
        data = {} if data is None else data
        if not self.total:
            return Outcome(False, self.empty, data, fraction=0.0)
        if not self.problems:
            return Outcome(True, success, data, fraction=1.0)
        message = "; ".join(self.problems[:shown]) + more(len(self.problems) - shown, self.unit) + "."
        message += "".join(f" {a}" for a in (self.advice, advice.strip()) if a)
        message += f" [{self.good} of {self.total} right]" if score else ""
        return Outcome(False, message, data, fraction=self.good / self.total)


# Advice after a wrong answer: (group, case index, case, what the rank returned).
AnswerHint = Callable[[Any, int, Case, Any], str]


def bool_answers(calls: list[tuple[Any, int, Case]], check: str, key: str, hint: AnswerHint) -> Outcome:
    """Every rank's bool at ``key`` of each call (group, case index, case) equals the expected one.

    The first wrong answer in full, with ``hint``'s advice when the rank returned something; then in
    how many calls answers were wrong. Partial credit: the share of right rank answers.
    """
    tally = Tally(unit="call", empty="no calls were run for this check")
    first: str | None = None
    wrong: set[str] = set()
    for g, i, case in calls:
        for r in range(g.world_size):
            why = case_failure(g, i, r, part=check)
            tally.add(why)
            if why is None:
                continue
            wrong.add(f"{g.name}: {case.label}")
            if first is None:
                got, where = result(g, i, r), f"{g.name}, rank {r}, {case.label}"
                said = got.get(key) if isinstance(got, dict) else None
                shown = said if isinstance(said, bool) else repr(said)
                want = case.expected[r][key]
                first = f"{where}: {why}." if got is None else f"{where}: returned {shown}, expected {want}."
                first += "" if got is None else hint(g, i, case, said)
    data: dict[str, Any] = {"rank_calls": tally.total, "passed": tally.good}
    if first is None:
        return tally.outcome(f"all {tally.total} answers right (every rank, every call)", data)
    data["wrong_calls"] = sorted(wrong)
    calls_wrong = f" Wrong in {len(wrong)} calls in all." if len(wrong) > 1 else ""
    score = f" [{tally.good} of {tally.total} right]"
    return Outcome(False, f"{first}{calls_wrong}{score}", data, fraction=tally.good / tally.total)


def mib(n: float) -> str:
    """Bytes in MiB, as a memory rule shows them: ``12.3 MiB``."""
    return f"{n / 2**20:,.1f} MiB"


def memory_problem(
    g: Any, allowed: int, over: Callable[[int], str], wrong: Callable[[], str | None], what: str
) -> tuple[int | None, str | None]:
    """Rank 0's memory high-water in group ``g``'s one case (``memory_peak``), and what is wrong with it, or None.

    Not measured; above ``allowed`` bytes (``over(peak)`` says how); or within them but counting for
    nothing, because the call's values are wrong (``wrong()``, asked only then, says why): ``what``
    names the calls whose memory counts ("a stack whose output and gradients are right").
    """
    peak = memory_peak(g, 0)
    if peak is None:
        failure = case_failure(g, 0, 0) or "this grader could not read its memory from the kernel"
        return None, f"the memory was not measured ({failure})"
    if peak > allowed:
        return peak, over(peak)
    if (why := wrong()) is not None:
        return (
            peak,
            f"the memory ({mib(peak)}) counts only for {what}, and this one is wrong ({why}); see the other checks",
        )
    return peak, None


def said(g: Any, i: int, rank: int, key: str) -> Any:
    """What ``rank`` returned at ``key`` in case ``i`` of group ``g`` (None if it returned no dict)."""
    got = result(g, i, rank)
    return got.get(key) if isinstance(got, dict) else None


def bool_rules(check: str, key: str, hint: AnswerHint, *, advice: str) -> tuple[Rule, Rule]:
    """The two rules of a lab whose ranks each return one bool per call at ``key``: every answer right
    (``bool_answers``, judged as ``check``), and every rank answering the same in each call
    (``rules.same_answer_everywhere``; ``advice`` follows "the ranks disagree (...)")."""

    def answers(facts: Facts) -> Outcome:
        return bool_answers(cases_judging(facts, check), check, key, hint)

    def agreement(facts: Facts) -> Outcome:
        calls = cases_judging(facts, check)
        return same_answer_everywhere(calls, lambda g, i, r: said(g, i, r, key), values_check=check, advice=advice)

    return answers, agreement

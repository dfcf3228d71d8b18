"""Trusted checks for distributed-sampler: the configurations per submission and the rules.

Never mounted into the sandbox. There is no single reference permutation: any sampler with
the right properties gets full marks. The rules put the ranks' index lists side by side,
per world size, configuration and epoch (coverage, equal counts, a new shuffle every epoch,
the same indices for the same seed and epoch).

Everything a rank returns is computed in the student's process, which can rewrite it: a process
that remembers its first pass can report it again for every later pass and every later sampler,
so lists from one process can look reproducible when the sampler is not. Determinism therefore
counts only across processes: each world size runs twice, the second time in new processes (as
after a restart) that list epoch 2 first. A process cannot know what another one yielded; only
indices that are a function of (seed, epoch) agree. The first process's repeated passes still
name the mistake in the message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import torch

from labs.authoring import Case, Facts, Outcome, Phase, case_failure, result, tallies

EPOCHS = 3
RESTARTED = "restarted"  # the phase that builds the samplers again in new processes
RESTART_ORDER = [2, 0, 1]  # its epochs: the last one first, as a job resumed at epoch 2
ADVICE_SAME = (
    "every rank must draw the same permutation (a torch.Generator seeded with seed + epoch, never with"
    " the rank) and take its own disjoint share of it"
)


def cases(world_size: int, gen: torch.Generator) -> list[Case]:
    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high, (1,), generator=gen))

    odd = draw(37, 100)
    while odd % world_size == 0:  # a size that world_size does not divide: padding needed
        odd = draw(37, 100)
    configs = [
        {"size": 48, "shuffle": True},
        {"size": 50, "shuffle": True},
        {"size": odd, "shuffle": True},
        {"size": 61, "shuffle": False},
    ]
    for config in configs:
        config["seed"] = draw(0, 2**31 - 2)  # the driver also uses seed + 1
    inputs = {"configs": configs, "epochs": EPOCHS}
    sizes = ", ".join(f"{c['size']}{'' if c['shuffle'] else ' (no shuffle)'}" for c in configs)
    return [
        Case(
            check="coverage",
            fn="ShardedSampler",
            driver="sample",
            label=f"data sets of {sizes}, epochs 0-{EPOCHS - 1}",
            inputs=[inputs for _ in range(world_size)],
            expected=[{} for _ in range(world_size)],  # judged by the rules below, not by value
        )
    ]


def phases(world_sizes: list[int], gen: torch.Generator) -> list[Phase]:
    """Per world size: the driver's passes, then the same configurations in new processes."""
    out = []
    for n in world_sizes:
        first = cases(n, gen)
        configs = first[0].inputs[0]["configs"]
        again = Case(
            check="deterministic",
            fn="ShardedSampler",
            driver="restarted",
            label=f"the same configurations in new processes, epochs {', '.join(map(str, RESTART_ORDER))}",
            inputs=[{"configs": configs, "order": RESTART_ORDER} for _ in range(n)],
            expected=[{} for _ in range(n)],
        )
        out += [Phase(None, n, first), Phase(RESTARTED, n, [again])]
    return out


def _name(config: dict[str, Any]) -> str:
    return f"data set of {config['size']}" + ("" if config["shuffle"] else " with shuffle=False")


def _ints(values: Any) -> bool:
    return isinstance(values, list) and all(type(i) is int for i in values)


def _valid(tree: Any, configs: int) -> bool:
    if not isinstance(tree, dict) or not isinstance(tree.get("configs"), list) or len(tree["configs"]) != configs:
        return False
    keys = ("epochs", "again", "fresh")
    return all(
        isinstance(c, dict)
        and all(isinstance(c.get(k), list) and len(c[k]) == EPOCHS and all(map(_ints, c[k])) for k in keys)
        and _ints(c.get("lens"))
        and _ints(c.get("other_seed"))
        for c in tree["configs"]
    )


Unit = tuple[Any, dict[str, Any], list[dict[str, Any]] | None, str | None]


def _units(facts: Facts, shuffled_only: bool = False) -> Iterator[Unit]:
    """(group, config, every rank's lists for it or None, why not) per world size and configuration."""
    for g in facts.groups:
        if g.phase == RESTARTED:
            continue
        for i, case in enumerate(g.cases):
            configs = case.inputs[0]["configs"]
            trees, why = [], None
            for r in range(g.world_size):
                failure = case_failure(g, i, r)
                tree = result(g, i, r)
                if failure is not None or not _valid(tree, len(configs)):
                    why = f"rank {r} did not return its lists ({failure or 'malformed result'})"
                    break
                trees.append(tree)
            for k, config in enumerate(configs):
                if shuffled_only and not config["shuffle"]:
                    continue
                yield g, config, ([t["configs"][k] for t in trees] if why is None else None), why


def _show(values: list[int], limit: int = 6) -> str:
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


Problem = Callable[[Any, dict[str, Any], list[dict[str, Any]]], str | None]


def _judge(
    facts: Facts, unit_problem: Problem, good: str, advice: Callable[[str], str], shuffled: bool = False
) -> Outcome:
    tally = tallies.Tally(unit="configuration")
    for g, config, ranks, why in _units(facts, shuffled):
        where = f"{g.name}, {_name(config)}"
        if ranks is None:
            tally.add(f"{where}: {why}", "Fix that error first: this rank's indices could not be compared.")
        elif problem := unit_problem(g, config, ranks):
            tally.add(f"{where}: {problem}", advice(problem))
        else:
            tally.add(None)
    return tally.outcome(good, {"configurations": tally.total, "passed": tally.good})


def _coverage_problem(g: Any, config: dict[str, Any], ranks: list[dict[str, Any]]) -> str | None:
    n, size = g.world_size, config["size"]
    total = -(-size // n) * n
    for e in range(EPOCHS):
        owners: dict[int, list[int]] = {}
        for r, c in enumerate(ranks):
            for i in c["epochs"][e]:
                owners.setdefault(i, []).append(r)
        outside = sorted(i for i in owners if not 0 <= i < size)
        if outside:
            return f"epoch {e}: index {outside[0]} is outside 0..{size - 1} (rank {owners[outside[0]][0]})"
        missing = sorted(set(range(size)) - set(owners))
        count = sum(len(v) for v in owners.values())
        if missing:
            what = f"index {missing[0]} is" if len(missing) == 1 else f"indices {_show(missing)} are"
            due = f"of {total} due with the padding" if total != size else f"of {size}"
            return f"epoch {e}: {what} on no rank (the ranks yielded {count} indices in all, {due})"
        if count > total:
            twice = sorted((i for i, rs in owners.items() if len(rs) > 1), key=lambda i: -len(owners[i]))
            where = ", ".join(f"{i} on ranks {'/'.join(map(str, owners[i]))}" for i in twice[:3])
            return (
                f"epoch {e}: the ranks hold {count} indices together, but the {size} padded to a multiple of {n}"
                f" are {total}: {where} (more than the {total - size} padding repeats)"
            )
    return None


def _coverage_advice(problem: str) -> str:
    found = re.search(r"yielded (\d+) indices in all, of (\d+)", problem)
    if found and int(found.group(1)) < int(found.group(2)):
        return (
            "Together the ranks must yield every index in every epoch: pad the permutation to a multiple of"
            " num_replicas by repeating its first indices, as DistributedSampler does; never drop the remainder."
        )
    if found:
        return "Together the ranks must yield every index in every epoch: " + ADVICE_SAME + "."
    if "outside" in problem:
        return "Yield indices of the data set, 0 .. dataset_size - 1, nothing else."
    return "The ranks' shares overlap: " + ADVICE_SAME + "."


def coverage(facts: Facts) -> Outcome:
    good = "in every epoch the ranks together yielded every index, each once apart from the padding"
    return _judge(facts, _coverage_problem, good, _coverage_advice)


def _count_problem(g: Any, config: dict[str, Any], ranks: list[dict[str, Any]]) -> str | None:
    size, n = config["size"], g.world_size
    due = -(-size // n)
    for e in range(EPOCHS):
        counts = [len(c["epochs"][e]) for c in ranks]
        if any(k != due for k in counts):
            return (
                f"epoch {e}: the ranks yielded {counts} indices (rank 0 first), but each must yield"
                f" ceil({size} / {n}) = {due}"
            )
        for r, c in enumerate(ranks):
            declared = c["lens"]
            if len(declared) != EPOCHS or declared[e] != counts[r]:
                got = declared[e] if e < len(declared) else "nothing"
                return f"epoch {e}: rank {r}'s len(sampler) is {got} but it yielded {counts[r]} indices"
    return None


def _count_advice(problem: str) -> str:
    if "len(sampler)" in problem:
        return "__len__ must return how many indices __iter__ yields: ceil(dataset_size / num_replicas)."
    return (
        "Every rank must get the same number of indices, ceil(dataset_size / num_replicas), or the ranks run"
        " different numbers of steps and the next collective hangs: pad the permutation to a multiple of"
        " num_replicas by repeating its first indices, as DistributedSampler does (dropping the remainder"
        " would lose samples)."
    )


def equal_counts(facts: Facts) -> Outcome:
    return _judge(
        facts,
        _count_problem,
        "every rank yielded ceil(dataset_size / num_replicas) indices, and len(sampler) said so",
        _count_advice,
    )


def _epoch_problem(g: Any, config: dict[str, Any], ranks: list[dict[str, Any]]) -> str | None:
    for e in range(EPOCHS - 1):
        for r, c in enumerate(ranks):
            a, b = c["epochs"][e], c["epochs"][e + 1]
            if a == b:
                return f"rank {r} yielded exactly the same indices in epochs {e} and {e + 1}"
            if sorted(a) == sorted(b):
                return f"rank {r} got the same examples in epochs {e} and {e + 1}, only in another order"
    return None


def _epoch_advice(problem: str) -> str:
    if "another order" in problem:
        return (
            "Shuffle the whole data set each epoch and then split it, so that which examples a rank sees"
            " changes too; shuffling within a fixed shard leaves each rank 1/N of the data for ever."
        )
    return (
        "set_epoch(epoch) must change the shuffle: seed the permutation's generator with seed + epoch. Without"
        " it every epoch repeats the first epoch's order on every rank."
    )


def epochs_differ(facts: Facts) -> Outcome:
    good = "every rank got a new share of a new permutation in every epoch"
    return _judge(facts, _epoch_problem, good, _epoch_advice, shuffled=True)


def _restarted(facts: Facts, n: int, k: int) -> tuple[list[list[list[int]]] | None, str]:
    """Every rank's passes (by epoch) over configuration ``k`` in the new processes of world size ``n``."""
    g = next((g for g in facts.groups if g.phase == RESTARTED and g.world_size == n), None)
    if g is None:
        return None, "the restarted processes never ran (an earlier group failed)"
    passes = []
    for r in range(n):
        tree, failure = result(g, 0, r), case_failure(g, 0, r)
        try:
            lists = tree["configs"][k]["epochs"]
            assert failure is None and len(lists) == EPOCHS and all(map(_ints, lists))
        except (AssertionError, KeyError, IndexError, TypeError):
            return (
                None,
                f"rank {r} of the restarted processes did not return its lists ({failure or 'malformed result'})",
            )
        passes.append(lists)
    return passes, ""


def _determinism_problem(facts: Facts) -> Problem:
    def problem(g: Any, config: dict[str, Any], ranks: list[dict[str, Any]]) -> str | None:
        k = next(k for k, c in enumerate(g.cases[0].inputs[0]["configs"]) if c is config)
        restarted, why = _restarted(facts, g.world_size, k)
        if restarted is None:
            return why
        for e in RESTART_ORDER:
            for r, c in enumerate(ranks):
                if restarted[r][e] != c["epochs"][e]:
                    return (
                        f"epoch {e}: a new process (as after a restart) that called set_epoch({e}) first got other"
                        f" indices on rank {r} than the first process did in epoch {e}"
                    )
        for e in range(EPOCHS):
            for r, c in enumerate(ranks):
                if c["again"][e] != c["epochs"][e]:
                    return f"epoch {e}: rank {r}'s second pass over the sampler yielded other indices than its first"
                if c["fresh"][e] != c["epochs"][e]:
                    return (
                        f"epoch {e}: a new sampler with the same seed (set_epoch called for epochs"
                        f" {EPOCHS - 1}..0) yielded other indices on rank {r}"
                    )
        if not config["shuffle"]:
            for e in range(1, EPOCHS):
                for r, c in enumerate(ranks):
                    if c["epochs"][e] != c["epochs"][0]:
                        return f"shuffle=False, but rank {r}'s indices in epoch {e} differ from epoch 0"
            return None
        if all(c["epochs"][0] == c["other_seed"] for c in ranks):
            return f"seeds {config['seed']} and {config['seed'] + 1} gave the same indices in epoch 0 on every rank"
        return None

    return problem


def _determinism_advice(problem: str) -> str:
    if "shuffle=False" in problem:
        return "Without shuffle, use range(dataset_size) in order, the same every epoch."
    if "seeds" in problem:
        return "The permutation must depend on the seed: seed the generator with seed + epoch."
    return (
        "The indices must be a function of (seed, epoch) only, the same in any process and after any earlier"
        " passes: make a new torch.Generator seeded with seed + epoch"
        " in every __iter__, not one generator in __init__ that advances with each pass (or the global RNG)."
    )


def deterministic(facts: Facts) -> Outcome:
    good = "the same seed and epoch gave the same indices, another seed others"
    return _judge(facts, _determinism_problem(facts), good, _determinism_advice)


RULES = {
    "coverage": coverage,
    "equal-counts": equal_counts,
    "epochs-differ": epochs_differ,
    "deterministic": deterministic,
}

"""The abstract plan of an episode: what happens, for whom, and where on a [0, 1) time line.

Planning is separate from wording (``render.py``): here every item gets a *position*; sorting by
position gives the event steps. Dependencies hold by construction — an update sits after the
version it supersedes, an inference after its parents, a question after the first statement of what
it asks — so no rejection sampling is needed.

Why the shapes below:
- first statements are Beta-distributed towards the start, so many facts are needed long after
  they were written (the case keep-most-recent fails);
- questions draw targets with replacement from a random "askable" subset: some slots are asked
  several times, many never, so a model must learn usefulness from features, not slot names;
- distractors are spread uniformly (before and after their fact), with values of the same type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .config import SimConfig
from .events import Kind
from .families import FamilySpec, RuleSpec, SlotSpec
from .pools import draw_value
from .text import Split

__all__ = ["Instance", "Item", "Plan", "QItem", "make_plan"]


@dataclass
class Instance:
    """One user's copy of a slot or rule, with the values of its versions."""

    user: int
    spec: SlotSpec | RuleSpec
    values: list[str] = field(default_factory=list)
    first_pos: float = 0.0


@dataclass
class Item:
    """A planned event. ``via`` says who produces it: user, system, doc, tool, agent or status."""

    pos: float
    kind: Kind
    user: int
    inst: Instance | None = None
    version: int = 0
    value: str | None = None
    via: str = "user"


@dataclass
class QItem:
    """A planned question about ``inst`` at position ``pos``."""

    pos: float
    inst: Instance


@dataclass
class Plan:
    """The plan: items sorted by position (index = step) and questions with their steps."""

    n_users: int
    items: list[Item]
    instances: list[Instance]
    questions: list[tuple[int, QItem]]


def _mix(rng: np.random.Generator, p_first: float, a: str, b: str) -> str:
    return a if rng.random() < p_first else b


def make_plan(fam: FamilySpec, rng: np.random.Generator, n: int, cfg: SimConfig, split: Split) -> Plan:
    """Plan an episode of exactly ``n`` events of family ``fam``."""
    n_users = int(rng.integers(cfg.min_users, cfg.max_users + 1)) if fam.multi_user else 1
    arrivals = [0.0] + [float(rng.uniform(0.0, 0.35)) for _ in range(n_users - 1)]

    def at(u: int, x: float) -> float:  # position x of user u's own time line on the shared one
        return arrivals[u] + (1.0 - arrivals[u]) * x

    items: list[Item] = []
    instances: list[Instance] = []
    base_slots = [s for s in fam.slots if not s.derived]
    rule_values: dict[str, str] = {}
    for u in range(n_users):
        items.append(Item(at(u, 0.0) - 1e-9, Kind.core_instruction, u, via="system"))  # the goal
        n_rules = 2 if fam.multi_user else int(rng.integers(2, len(fam.rules) + 1))
        for ri in sorted(rng.choice(len(fam.rules), n_rules, replace=False)):
            rule = fam.rules[int(ri)]
            if rule.value and rule.key not in rule_values:  # one policy for all users of the task
                rule_values[rule.key] = draw_value(rule.value, rng, split)
            inst = Instance(u, rule, [rule_values[rule.key]] if rule.value else [])
            early = rng.random() < 0.7  # the rest arrive mid-task: a "new instruction" trigger
            inst.first_pos = at(u, rng.uniform(0.001, 0.03) if early else rng.uniform(0.1, 0.6))
            instances.append(inst)
            items.append(Item(inst.first_pos, Kind.core_instruction, u, inst, 1,
                              inst.values[0] if inst.values else None, _mix(rng, 0.5, "system", "user")))
        if fam.multi_user:
            k = int(np.clip(round(n / (n_users * 25)), 3, 6))
        else:
            k = int(np.clip(4 + n // 60 + rng.integers(0, 2), 4, len(base_slots)))
        chosen = {base_slots[int(i)].key for i in rng.choice(len(base_slots), min(k, len(base_slots)), replace=False)}
        first_pos: dict[str, float] = {}
        for slot in fam.slots:
            if slot.derived:
                if not all(p in chosen for p in slot.parents) or rng.random() > 0.8:
                    continue
                after = max(first_pos[p] for p in slot.parents)
                inst = Instance(u, slot, [draw_value(slot.value, rng, split)], after + (1 - after) * rng.uniform(0.05, 0.5))
                items.append(Item(inst.first_pos, Kind.inference, u, inst, 1, inst.values[0], "agent"))
                instances.append(inst)
                continue
            if slot.key not in chosen:
                continue
            inst = Instance(u, slot, [draw_value(slot.value, rng, split)], at(u, 0.02 + 0.9 * rng.beta(1.1, 2.4)))
            first_pos[slot.key] = inst.first_pos
            if slot.via == "tool":
                items.append(Item(inst.first_pos, Kind.tool_result, u, inst, 1, inst.values[0], "tool"))
            else:
                via = _mix(rng, 0.8, slot.via, "doc" if slot.via == "user" else "user")
                items.append(Item(inst.first_pos, Kind.key_fact, u, inst, 1, inst.values[0], via))
            pos, p = inst.first_pos, (cfg.update_prob if slot.updatable else 0.0)
            while len(inst.values) < 3 and rng.random() < p:
                pos = pos + (1 - pos) * rng.uniform(0.1, 0.7)
                inst.values.append(draw_value(slot.value, rng, split, avoid=inst.values))
                via = "tool" if slot.via == "tool" else _mix(rng, 0.85, "user", "doc")
                items.append(Item(pos, Kind.update, u, inst, len(inst.values), inst.values[-1], via))
                p *= 0.5
            instances.append(inst)

    # Look-alikes: same slot, a value of the same type that is never the answer.
    fixed = len(items)
    n_d = min(round(n * cfg.distractor_rate * rng.uniform(0.8, 1.2)), max(0, n - fixed - n // 4))
    targets = [i for i in instances if i.values]
    weights = np.array([0.3 if isinstance(i.spec, RuleSpec) else 1.0 for i in targets])
    for ti in rng.choice(len(targets), n_d, p=weights / weights.sum()) if targets and n_d else []:
        inst = targets[int(ti)]
        spec_value = inst.spec.value
        assert spec_value is not None  # targets all have values
        value = draw_value(spec_value, rng, split, avoid=inst.values)
        via = str(rng.choice(["user", "doc", "tool"], p=[0.7, 0.15, 0.15]))
        items.append(Item(at(inst.user, rng.random()), Kind.distractor, inst.user, inst, 0, value, via))

    # Filler: secrets, tool noise, the agent's idle reasoning, temporary values, small talk.
    rest = n - len(items)
    n_secret = min(rest, 1 + int(rng.poisson(n / 150)))
    rest -= n_secret
    n_tool = int(rest * rng.uniform(0.10, 0.16))  # int() floors: the parts never exceed the rest
    n_infer = int(rest * rng.uniform(0.06, 0.10))
    n_temp = int(rest * rng.uniform(0.18, 0.26))
    n_chat = rest - n_tool - n_infer - n_temp
    for kind, count in ((Kind.secret, n_secret), (Kind.tool_result, n_tool), (Kind.inference, n_infer),
                        (Kind.temporary, n_temp), (Kind.chitchat, n_chat)):
        for _ in range(count):
            u = int(rng.integers(n_users))
            items.append(Item(at(u, rng.random()), kind, u, via="filler"))

    order = sorted(range(len(items)), key=lambda j: (items[j].pos, j))
    items = [items[j] for j in order]
    positions = np.array([it.pos for it in items])

    # Questions: targets with replacement from the askable subset, after the first statement.
    askable = [i for i in instances
               if rng.random() < cfg.ask_fraction * (0.6 if isinstance(i.spec, RuleSpec) else 1.0)]
    if not askable:
        askable = [instances[int(rng.integers(len(instances)))]]
    n_q = max(2, round(n * cfg.question_rate * rng.uniform(0.75, 1.25)))
    seen: set[tuple[int, int]] = set()
    questions: list[tuple[int, QItem]] = []
    # Every askable item is asked once before any is asked again (a permutation, then with replacement).
    picks = [*rng.permutation(len(askable))[:n_q], *rng.integers(len(askable), size=max(0, n_q - len(askable)))]
    for pick in picks:
        inst = askable[int(pick)]
        q_pos = inst.first_pos + (1.0 - inst.first_pos) * rng.uniform(0.03, 1.0)
        step = int(np.searchsorted(positions, q_pos, side="left"))  # events strictly before q_pos
        if (id(inst), step) in seen:
            continue
        seen.add((id(inst), step))
        questions.append((step, QItem(q_pos, inst)))
    questions.sort(key=lambda sq: (sq[0], sq[1].pos))
    return Plan(n_users, items, instances, questions)

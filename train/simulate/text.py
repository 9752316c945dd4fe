"""Paraphrase templates shared by every family, split between training and evaluation.

Seed 001 pitfall 1: a utility model can "cheat" by memorising surface forms. So every template list
here (and every family-specific phrase list and entity pool) is split by one rule, :func:`split_items`:
item ``i`` belongs to the eval split when ``i % 3 == 2`` and to train otherwise. Train and eval
episodes therefore never share a sentence frame, only the topic vocabulary (``hotel``, ``deadline``)
that any real task in the domain would use.

Placeholders are ``{name}``; :func:`fill` substitutes only known names, so literal braces (JSON-ish
tool output) survive and a forgotten placeholder raises instead of leaking into the data.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal, TypeVar

__all__ = ["SPLITS", "Split", "Templates", "all_template_lists", "fill", "split_items", "templates"]

Split = Literal["train", "eval"]
SPLITS: tuple[Split, ...] = ("train", "eval")
T = TypeVar("T")

_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
# "a" before a substituted vowel-initial noun ("a approval threshold"); "u" is left alone ("a unit").
_AN = re.compile(r"\b([Aa]) (?=[aeioAEIO])")


def split_items(items: Sequence[T], split: Split) -> tuple[T, ...]:
    """The part of ``items`` that belongs to ``split`` (eval = every third item, from index 2).

    Raises:
        ValueError: if ``split`` is unknown or the list is too short to give both splits an item.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if len(items) < 3:
        raise ValueError(f"a split list needs at least 3 items (2 train, 1 eval), got {len(items)}: {items!r}")
    return tuple(x for i, x in enumerate(items) if (i % 3 == 2) == (split == "eval"))


def fill(template: str, **values: str) -> str:
    """Substitute ``{name}`` placeholders, fix "a"/"an", and capitalise the first letter.

    Raises:
        KeyError: a placeholder in ``template`` has no value (a bug in a template, not in data).
    """

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in values:
            raise KeyError(f"template {template!r} needs {{{name}}}; got {sorted(values)}")
        return str(values[name])

    out = _AN.sub(r"\1n ", _PLACEHOLDER.sub(sub, template))
    # Capitalise the sentence, but not an identifier ("flight_search returned…").
    if "_" in out.split(" ", 1)[0]:
        return out
    return out[:1].upper() + out[1:]


# --- statements of a slot value ------------------------------------------------------------------
_FACT_USER = (
    "The {noun} {ctx} is {v}.",
    "Let's go with {v} for the {noun}.",
    "Just so you have it: the {noun} is {v}.",
    "We settled on {v} as the {noun}.",
    "Put down {v} for the {noun}, please.",
    "For the {noun} I'd like {v}.",
    "Confirmed, the {noun} will be {v}.",
    "Make a note that the {noun} is {v}.",
    "Our {noun} {ctx}: {v}.",
    "I've decided the {noun} should be {v}.",
    "{v} is the {noun} we're using {ctx}.",
    "Please use {v} as the {noun} from now on.",
    "Okay, so the {noun} is going to be {v}.",
    "Writing this down for you: {noun} = {v}.",
    "So we're clear, {v} is the {noun}.",
)
_FACT_DOC = (
    "Per the {doc}, the {noun} is {v}.",
    "The {doc} lists the {noun} as {v}.",
    "According to the {doc}: {noun}, {v}.",
    "Found in the {doc}: the {noun} is set to {v}.",
    "The {doc} says {v} for the {noun}.",
    "Excerpt from the {doc}, {noun}: {v}.",
)
_FACT_TOOL = (
    "{tool} returned: {noun} = {v}, status OK.",
    "[{tool}] {noun}: {v} (confirmed).",
    "Result from {tool}: {noun} {v} created.",
    "{tool} completed. {noun}: {v}.",
    "Call to {tool} succeeded; {noun} is {v}.",
    "{tool} response {\"field\": \"{noun}\", \"value\": \"{v}\"}",
)
# --- updates that supersede a value --------------------------------------------------------------
_UPDATE_USER = (
    "Change of plans: the {noun} is now {v}.",
    "Actually, scratch that, make the {noun} {v} instead.",
    "Update on the {noun}: it's {v} now, not {old}.",
    "Correction: the {noun} should be {v}.",
    "We had to switch the {noun} to {v}.",
    "Small change, {v} replaces {old} as the {noun}.",
    "Forget {old}; the {noun} is {v}.",
    "The {noun} moved to {v}.",
    "New {noun}: {v}. The old one is off.",
    "Heads up, we changed the {noun} to {v}.",
    "Turns out {old} won't work, so the {noun} is {v}.",
    "Revised {noun}: {v} (instead of {old}).",
)
_UPDATE_TOOL = (
    "{tool} reports a change: {noun} is now {v} (was {old}).",
    "[{tool}] {noun} updated to {v}.",
    "{tool}: modification saved, {noun} {v} replaces {old}.",
    "{tool} re-issued the {noun}: {v}.",
    "Result from {tool}: {noun} changed to {v}.",
    "{tool} amended record, {noun} = {v}.",
)
# --- questions asked later -----------------------------------------------------------------------
_QUESTION = (
    "What's the {noun} again?",
    "Remind me, which {noun} did we end up with?",
    "Can you tell me the {noun} {ctx}?",
    "Which {noun} are we going with?",
    "Sorry, I forgot: what did we say for the {noun}?",
    "Quick question about the {noun}, what is it?",
    "Could you look up the {noun} for me?",
    "Do you still have the {noun} handy?",
    "What {noun} did I give you?",
    "Before I forget, what's our {noun}?",
    "Where did we land on the {noun}?",
    "I need the {noun}, what was it?",
    "What do you have down as the {noun}?",
    "Can you check the {noun} {ctx} for me?",
    "Refresh my memory on the {noun}?",
)
_RULE_QUESTION = (
    "What did I tell you about the {noun}?",
    "Remind me of the {noun} I set.",
    "Is there a {noun} I gave you earlier?",
    "What was my {noun} again?",
    "Can you repeat the {noun} we agreed on?",
    "What's the standing {noun}?",
)
# --- look-alikes: same topic and slot style, never the answer ------------------------------------
_LOOKALIKE_USER = (
    "{name}'s {noun} last time was {v}.",
    "We looked at {v} for the {noun} but decided against it.",
    "A friend recommended {v} as a {noun}, just FYI.",
    "Not ours, but {name} used {v} as the {noun}.",
    "Last year the {noun} was {v}, if that matters.",
    "Someone on a forum said {v} is a popular {noun}.",
    "{v} came up as a {noun} option; probably not for us.",
    "{name} mixed up the {noun} with {v}, funny.",
    "The old template still shows {v} for the {noun}.",
    "{name} asked whether {v} could work as a {noun}.",
    "Back in the spring our {noun} was {v}.",
    "In the example file the {noun} is {v}.",
    "My colleague {name} went with {v} for the {noun}.",
    "If it were up to {name}, the {noun} would be {v}.",
    "I once had {v} as a {noun} and it was fine.",
)
_LOOKALIKE_DOC = (
    "An older version of the {doc} mentions {v} as the {noun}.",
    "The {doc} also lists {v} as an alternative {noun}.",
    "Footnote in the {doc}: {name} once had {v} for the {noun}.",
    "A comment in the {doc} suggests {v} for the {noun}.",
    "The sample section of the {doc} uses {v} as the {noun}.",
    "The {doc} archive has {v} as a previous {noun}.",
)
_LOOKALIKE_TOOL = (
    "{tool} suggestion: {noun} {v} (not selected).",
    "[{tool}] alternative {noun}: {v}.",
    "{tool} cached entry, {noun}: {v}.",
    "{tool} also matched {v} for the {noun}.",
    "{tool} returned a similar record: {noun} {v}.",
    "{tool} preview only, {noun} would be {v}.",
)
# --- the agent's own inferences ------------------------------------------------------------------
_INFER_USEFUL = (
    "Given the {pnoun} is {p}, I'll plan on {v} for the {noun}.",
    "Since we have {p} as the {pnoun}, the best {noun} is {v}.",
    "Working it through: {pnoun} {p} means the {noun} should be {v}.",
    "Based on {p}, my recommendation for the {noun} is {v}.",
    "Note to self: with {p} locked in, go with {v} as the {noun}.",
    "I've concluded the {noun} works best as {v}, given {p}.",
)
_INFER_NOISE_VALUE = (
    "The {pnoun} ({p}) looks consistent with everything else so far.",
    "Thinking aloud: {p} seems reasonable for the {pnoun}.",
    "It may be worth asking whether {p} is final for the {pnoun}.",
    "I'm fairly confident {p} won't cause trouble as the {pnoun}.",
    "Cross-checked the {pnoun} ({p}); nothing odd.",
    "{p} as the {pnoun} fits the plan, I think.",
)
_INFER_NOISE = (
    "I should double-check the {pnoun} later.",
    "No conflicts spotted around the {pnoun}.",
    "I'll keep an eye on the {pnoun} in case it changes.",
    "Plan: wrap up the {pnoun} first, then move on.",
    "Summary so far: we've touched on the {pnoun} and a few open points.",
    "Open question in my head: is the {pnoun} settled?",
)
# --- filler --------------------------------------------------------------------------------------
_CHAT_USER = (
    "Thanks, that's super helpful!", "Haha, fair enough.", "Sorry for the slow reply, hectic morning.",
    "The weather here is awful today.", "How's your day going?", "Coffee break, back in five.",
    "Appreciate your patience with all this.", "Ok cool.", "I'm so ready for the weekend.",
    "You're a lifesaver, honestly.", "Let me think about it for a sec.", "Ugh, my laptop keeps freezing.",
    "Sounds good to me!", "No rush on any of this.", "Happy Friday!",
    "Brb, someone's at the door.", "lol yes exactly", "I'll get back to you on that.",
)
_CHAT_AGENT = (
    "Happy to help!", "Of course, take your time.", "Glad that works.",
    "No problem at all.", "Got it, thanks for confirming.", "Sure thing.",
)
_TEMP = (
    "Progress: {n} of {m} items processed ({pct}%).", "Current time: {time}.",
    "Sync completed at {time}; {n} records updated.", "Still waiting on {tool}, retrying in {n} s.",
    "Session heartbeat OK at {time}.", "Draft autosaved at {time}.", "{tool} queue length: {n}.",
    "Step {n}/{m} done.", "Rate limit: {n} requests left this minute.", "Cache warmed in {ms} ms.",
    "User is typing...", "Background job #{n} finished at {time}.",
)
_TEMP_TTL = (
    "Hold on the current selection expires in {mins} minutes.", "Quote valid for {mins} minutes only.",
    "Temporary share link active for {mins} minutes: https://share.example.com/{code}",
    "Price lock good for the next {mins} minutes.", "Reservation hold lapses in {mins} minutes.",
    "Preview session closes in {mins} minutes.",
)
_TOOL_NOISE = (
    "{tool} returned {n} results in {ms} ms.", "{tool}: 200 OK, nothing changed.",
    "{tool} call timed out; will retry.", "{tool} listed {n} options, none selected yet.",
    "Fetched page {n} of {m} from {tool}.", "{tool} warning: field 'notes' is empty.",
    "{tool} returned an empty response.", "Validation passed ({tool}, {n} checks).",
    "{tool} rate-limited the request (429).",
)
_SECRET = (
    "Here's the {system} API key for now: {key}. It stops working in {ttl}.",
    "Temporary {system} password: {key} (valid {ttl}).",
    "Use this token to get into the {system}: {key}. It expires in {ttl}.",
    "The {system} password is {key} for the next {ttl}.",
    "Credentials for the {system}: token: {key}, rotating in {ttl}.",
    "Paste this key into the {system} when asked: {key} (expires in {ttl}).",
)
# --- core instructions: a generic frame around a family-specific rule body -----------------------
_CORE = (
    "Standing instruction: {rule}.", "Please always remember this: {rule}.",
    "Ground rule for everything we do: {rule}.", "Important, for the whole task: {rule}.",
    "One thing that never changes: {rule}.", "Non-negotiable: {rule}.",
)
_URGENT_PREFIX = ("Important: ", "Please note: ", "Key point: ", "Crucial: ", "Must-know: ", "FYI, critical: ")
_MULTI_USER_HELLO = (
    "Hi, {first} here again. ", "Hello, it's {first}. ", "{first} again, quick one: ",
    "Hey, this is {first}. ", "{first} back with a question. ", "Good day, {first} speaking. ",
)


class Templates:
    """Every generic template list, restricted to one split (attribute names = template roles)."""

    def __init__(self, split: Split) -> None:
        self.split = split
        g = globals()
        for name in _NAMES:
            setattr(self, name, split_items(g["_" + name.upper()], split))

    fact_user: tuple[str, ...]
    fact_doc: tuple[str, ...]
    fact_tool: tuple[str, ...]
    update_user: tuple[str, ...]
    update_tool: tuple[str, ...]
    question: tuple[str, ...]
    rule_question: tuple[str, ...]
    lookalike_user: tuple[str, ...]
    lookalike_doc: tuple[str, ...]
    lookalike_tool: tuple[str, ...]
    infer_useful: tuple[str, ...]
    infer_noise_value: tuple[str, ...]
    infer_noise: tuple[str, ...]
    chat_user: tuple[str, ...]
    chat_agent: tuple[str, ...]
    temp: tuple[str, ...]
    temp_ttl: tuple[str, ...]
    tool_noise: tuple[str, ...]
    secret: tuple[str, ...]
    core: tuple[str, ...]
    urgent_prefix: tuple[str, ...]
    multi_user_hello: tuple[str, ...]


_NAMES = tuple(Templates.__annotations__)


@lru_cache(maxsize=2)
def templates(split: Split) -> Templates:
    """The generic templates of ``split`` (cached; treat as read-only)."""
    return Templates(split)


def all_template_lists() -> dict[str, tuple[str, ...]]:
    """Every generic template list in full (both splits), by role name; used by tests."""
    g = globals()
    return {name: g["_" + name.upper()] for name in _NAMES}

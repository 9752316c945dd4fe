"""A store the inspector tests look at, built through the public API only: two users, sessions, a
correction, a derived memory, a secret, recalls, and retention decisions that kept, archived and
deleted. ``build(target)`` returns what was written, for the tests to compare pages with."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from runtime import MemoryStore, RetentionPolicy, Triggers

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
OTHER_USER_TEXT = "Bob's private note: the Zephyr launch code name is BLUEHERON"

ALICE = [  # (session, speaker, text)
    ("s1", "user", "I'm allergic to peanuts, please remember that for restaurant picks."),
    ("s1", "agent", "Noted: no peanuts. I found three Thai places without peanut dishes near the office."),
    ("s1", "user", "The team offsite budget is 12k EUR."),
    ("s1", "user", "ok thanks"),
    ("s2", "user", "Book the offsite for the week of 15 June in Lisbon."),
    ("s2", "agent", "I shortlisted Hotel Avenida (4 rooms) and Casa Azul (6 rooms) for 15-19 June."),
    ("s2", "user", "cool"),
    ("s2", "user", "My manager is Dana Whitfield; copy her on travel bookings."),
    ("s3", "user", "Prefer morning flights, never red-eyes."),
    ("s3", "agent", "Flights TP1351 08:10 and TP1353 10:40 fit the morning preference."),
    ("s3", "user", "sure"),
    ("s3", "user", "Our vendor API key is " + SECRET),
]


@dataclass
class Demo:
    target: Any
    user: str = "alice"
    other: str = "bob"
    turns: list[str] = field(default_factory=list)  # ids of ALICE's turns, in order
    ids: dict[str, str] = field(default_factory=dict)


def build(target: Any, embedder: Any = None) -> Demo:
    """Write the demo into ``target`` (an SQLite path or a PostgreSQL URL) through the public API."""
    demo = Demo(target)
    policy = RetentionPolicy(capacity=6, forgotten="archive", triggers=Triggers(on_session_end=True))
    with MemoryStore.open(target, embedder=embedder) as store:
        me = store.scope(user_id=demo.user, policy=policy)
        for i, (sid, speaker, text) in enumerate(ALICE):
            now = T0 + timedelta(days=int(sid[1:]) * 3, minutes=i)
            rec = me.write(text, session_id=sid, dialog_role=speaker, created_at=now)
            demo.turns.append(rec.id)
            if i in (3, 7, 11):
                me.end_session(now=now + timedelta(minutes=30))
        budget = demo.turns[2]
        new = me.update(budget, "The team offsite budget is now 15k EUR.")
        demo.ids["budget v2"] = new.id
        derived = me.write("Alice needs peanut-free venues for the Lisbon offsite.",
                           source_type="derived_inference", dialog_role="agent",
                           derived_from=[demo.turns[0]], session_id="s3")
        demo.ids["derived"] = derived.id
        me.recall("what is alice allergic to?", k=2)  # recall counts the inspector shows
        me.recall("peanut allergy", k=1)
        other = store.scope(user_id=demo.other)
        other.write(OTHER_USER_TEXT, session_id="b1")
        other.write("Bob likes window seats.", session_id="b1")
        other.retain(capacity=1)
    return demo

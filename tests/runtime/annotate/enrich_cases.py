"""Hand-labelled support-chat lines for the enrichment tests (written for them, not taken from a corpus).

``TONE_DEV`` chose ``EnrichConfig.tone_margin``; ``TONE_TEST`` is only ever reported, never tuned on.
Neither set shares a line with the prototypes' examples (``DEFAULT_TONE_EXAMPLES``).
"""

from __future__ import annotations

TONE_DEV: list[tuple[str, str]] = [
    ("My order number is 5521 and it was placed on Monday.", "neutral"),
    ("I'd like to change the delivery address to my office.", "neutral"),
    ("Which plan includes the export feature?", "neutral"),
    ("The router model is the X200.", "neutral"),
    ("I have been waiting two weeks and still no answer, this is a joke.", "frustrated"),
    ("Stop sending me the same useless template reply.", "frustrated"),
    ("Why do I have to explain this again? You people never listen.", "frustrated"),
    ("Your billing is a mess and I'm sick of it.", "frustrated"),
    ("Wonderful, the issue is gone, many thanks!", "satisfied"),
    ("You guys are great, the new version runs smoothly.", "satisfied"),
    ("Thanks for the quick fix, much appreciated.", "satisfied"),
    ("Excellent support as always, thank you.", "satisfied"),
    ("Help, our checkout is broken and we're losing sales right now.", "anxious"),
    ("I'm really worried the transfer got lost.", "anxious"),
    ("We go live in an hour and the login doesn't work!", "anxious"),
    ("I'm panicking, all my files disappeared.", "anxious"),
]

TONE_TEST: list[tuple[str, str]] = [
    ("Please add my colleague to the team account.", "neutral"),
    ("The invoice should be addressed to the Berlin office.", "neutral"),
    ("I bought the blue model, not the black one.", "neutral"),
    ("How do I export my contacts to a spreadsheet?", "neutral"),
    ("My subscription renews on the first of each month.", "neutral"),
    ("The parcel was delivered to the front desk.", "neutral"),
    ("Is there a student discount?", "neutral"),
    ("We have twelve users on the business plan.", "neutral"),
    ("I've called four times and every agent tells me something different.", "frustrated"),
    ("This is absurd, you cancelled my booking without asking.", "frustrated"),
    ("I'm tired of waiting for a refund that never comes.", "frustrated"),
    ("Honestly your product is a waste of money.", "frustrated"),
    ("Nobody has fixed the bug I reported a month ago, pathetic.", "frustrated"),
    ("I am extremely disappointed and fed up with these delays.", "frustrated"),
    ("The app froze again and I lost all my work, unbelievable.", "frustrated"),
    ("You charged my card three times, this is outrageous.", "frustrated"),
    ("Thanks a million, it works perfectly now.", "satisfied"),
    ("Great, the new charger arrived today, very happy.", "satisfied"),
    ("Really appreciate how fast you sorted this out.", "satisfied"),
    ("Cheers, that answered my question.", "satisfied"),
    ("Lovely service, I'll recommend you to my friends.", "satisfied"),
    ("Fantastic, the refund is already on my account.", "satisfied"),
    ("That was super helpful, thank you for your patience.", "satisfied"),
    ("All good now, thanks for following up.", "satisfied"),
    ("Our payment system is down and the shop opens in ten minutes.", "anxious"),
    ("I'm afraid someone is using my card, please block it now.", "anxious"),
    ("I need the documents before my visa appointment tomorrow morning.", "anxious"),
    ("Customers can't log in and we're losing money every minute.", "anxious"),
    ("I'm worried I'll be charged a penalty if this isn't fixed today.", "anxious"),
    ("My flight leaves in two hours and the ticket still isn't issued.", "anxious"),
    ("Someone changed my password, I'm really scared.", "anxious"),
    ("The server crashed during the launch, we need help urgently.", "anxious"),
]

# (text, expected entity tags) — written before the patterns were final; ENTITY_TEST is reported.
ENTITY_DEV: list[tuple[str, set[str]]] = [
    ("Order #8812 arrived broken", {"order:8812"}),
    ("I spoke with Maria Lopez about the iPhone 15 Pro", {"person:maria lopez", "product:iphone 15 pro"}),
    ("Budget for project Orion is 40k EUR", {"project:orion"}),
    ("Ticket ORD-123 is still open", {"ticket:ORD-123"}),
    ("Thanks Anna, the Galaxy S23 works now", {"person:anna", "product:galaxy s23"}),
    ("Please refund invoice INV-2024-001", {"invoice:INV-2024-001"}),
    ("The meeting moved to Thursday", set()),
    ("Ask Dr. Chen about booking 77812", {"person:chen", "booking:77812"}),
]

ENTITY_TEST: list[tuple[str, set[str]]] = [
    ("My order 44120 never arrived and tracking says delivered", {"order:44120"}),
    ("Case #99817 was closed without a reply", {"case:99817"}),
    ("I talked with Jonas yesterday about the refund", {"person:jonas"}),
    ("The Pixel 8 Pro screen cracked after a week", {"product:pixel 8 pro"}),
    ("Can you merge account 55012 into account 55013?", {"account:55012", "account:55013"}),
    ("Reference RMA-5531 for the return of my ThinkPad X1", {"id:RMA-5531", "product:thinkpad x1"}),
    ("Project Helios needs two more designers", {"project:helios"}),
    ("Please contact Sarah Kim about the contract", {"person:sarah kim"}),
    ("The package for booking BK-2291 is late", {"booking:BK-2291"}),
    ("I bought a Kindle Paperwhite 5 last month", {"product:kindle paperwhite 5"}),
    ("The weather in Paris is nice today", set()),
    ("Refund for invoice 300145 was approved by Tom", {"invoice:300145", "person:tom"}),
    ("We ship the Surface Laptop 5 on Friday", {"product:surface laptop 5"}),
    ("Our team lead is out this week", set()),
    ("Ticket TCK-00912 mentions error 500 on checkout", {"ticket:TCK-00912"}),
    ("Thanks to Priya the migration of project Atlas is done", {"person:priya", "project:atlas"}),
    ("My Dell XPS 13 will not boot", {"product:dell xps 13"}),
    ("Invoice #7781 was sent to the wrong address", {"invoice:7781"}),
    ("Call me back on Monday please", set()),
    ("Order ORD-77120 and order ORD-77121 were merged", {"order:ORD-77120", "order:ORD-77121"}),
]

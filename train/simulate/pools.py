"""Entity pools and value generators for slot values, split between training and evaluation.

Two kinds of pools:

- *Entity pools* (``_NAMED``: people, cities, hotels, vendors, datasets…) are split with
  :func:`~train.simulate.text.split_items`, so no eval entity name ever appears in a train episode
  (seed 001 pitfall 1). Composite values (a hotel is a name word + a kind) are split on the name word.
- *Vocabulary pools* (``_VOCAB``: weekdays, plan tiers, citation styles…) are the domain's ordinary
  words and are shared: an eval task about citations still says "APA".

Numbers, dates, times and codes are drawn fresh from the episode's generator.

A value spec is a short string read by :func:`draw_value`:
``pool:NAME`` · ``person`` · ``first`` · ``hotel`` · ``flight`` · ``address`` · ``paper`` · ``date`` ·
``time`` · ``datetime`` · ``money:LO:HI`` · ``count:LO:HI[:UNIT]`` · ``float:LO:HI`` · ``code:PATTERN``
(in a code pattern ``A`` → a capital letter, ``9`` → a digit, anything else is literal).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import numpy as np

from .text import Split, split_items

__all__ = ["SECRET_PATTERN", "draw_value", "entity_atoms", "pool", "secret_string", "validate_spec"]

_NAMED: dict[str, tuple[str, ...]] = {
    "first": ("Priya", "Tomas", "Ingrid", "Kwame", "Mei", "Diego", "Aisha", "Lars", "Yuki", "Omar", "Sofia",
              "Ravi", "Hana", "Felix", "Zara", "Mateo", "Leila", "Jonas", "Amara", "Kenji", "Nadia", "Rohan",
              "Elena", "Tariq", "Freya", "Luca", "Imani", "Sven", "Chloe", "Dmitri", "Noor", "Pablo",
              "Astrid", "Kofi", "Ines", "Hugo"),
    "last": ("Okafor", "Lindqvist", "Tanaka", "Moreau", "Haddad", "Kowalski", "Brennan", "Castillo",
             "Nakamura", "Osei", "Petrov", "Ferreira", "Sato", "Delacroix", "Mensah", "Varga", "Quinlan",
             "Iyer", "Novak", "Reyes", "Holmberg", "Adeyemi", "Kaur", "Bauer", "Silva", "Costa", "Dubois",
             "Ahmed", "Larsen", "Rossi"),
    "city": ("Lisbon", "Porto", "Vienna", "Prague", "Kyoto", "Osaka", "Seville", "Valencia", "Montreal",
             "Edinburgh", "Dublin", "Copenhagen", "Oslo", "Bergen", "Helsinki", "Tallinn", "Riga", "Krakow",
             "Budapest", "Ljubljana", "Zagreb", "Marrakech", "Cape Town", "Hanoi", "Seoul", "Busan",
             "Melbourne", "Auckland", "Santiago", "Cusco"),
    "hotel_word": ("Marlowe", "Alder", "Bellhaven", "Corvin", "Duskwood", "Elmsworth", "Greystone",
                   "Harrowgate", "Ivybridge", "Kestrel", "Larkspur", "Moorfield", "Northgate", "Oakhurst",
                   "Pemberton", "Quillon", "Saltmarsh", "Thistle", "Umberfield", "Westbrook", "Yarrow"),
    "airline": ("Aurora Air", "Bluewing", "Cirrus Airways", "Northstar Air", "Pelican Airlines",
                "Meridian Air", "Skyline Express", "Solstice Air", "Tradewind Airways", "Polaris Air",
                "Kite Airlines", "Zenith Air", "Albatross Air", "Monsoon Air", "Falconwing", "Harbourjet",
                "Summit Airways", "Vela Air"),
    "restaurant": ("Casa Lumen", "The Copper Pot", "Bistro Amandine", "Sakura Table", "The Olive Press",
                   "Little Saffron", "Ember and Oak", "Noodle Lab", "Maison Ferro", "The Green Fig",
                   "Taqueria Sol", "Blue Lantern", "Harvest Room", "Pho Dao", "The Salt Cellar", "Cafe Mirabel",
                   "Smoke and Barrel", "Trattoria Lucia", "Kin Khao Corner", "The Gilded Spoon", "Lotus Court"),
    "doc_title": ("Quarterly Outlook", "Remote Work Playbook", "Field Safety Manual", "Churn Deep-Dive",
                  "Urban Heat Grant Proposal", "Patient Intake Guide", "Annual Impact Report",
                  "Migration Runbook", "Brand Voice Handbook", "Water Access White Paper",
                  "Volunteer Training Notes", "Product Vision Memo", "Coastal Erosion Study",
                  "Pricing Strategy Brief", "Library Renovation Plan"),
    "audience": ("first-year students", "the board", "field technicians", "new customers", "investors",
                 "the engineering team", "policy makers", "high-school teachers", "clinic staff",
                 "city council members", "volunteers", "retail partners"),
    "product": ("Nimbus 14 laptop", "Aerolite headphones", "Pulsar fitness band", "Vortex blender",
                "Glowline desk lamp", "Orbitron robot vacuum", "Inkleaf e-reader", "Trailmark hiking boots",
                "Packwell backpack", "Brewmaster kettle", "Snapframe camera", "Stridewise running shoes",
                "Cloudrest pillow", "Voltcharge power bank", "Clearsound speaker", "Frostbox mini fridge",
                "Pixelpad tablet", "Handycut knife set", "Airloom fan", "Chillnest mattress",
                "Wavelet router"),
    "codename": ("Bluejay", "Falconer", "Monarch", "Tidewater", "Lodestar", "Sandpiper", "Redwood",
                 "Nightjar", "Keystone", "Ironbark", "Goldcrest", "Silverline", "Wildfire", "Starling",
                 "Pinecone", "Copperhead", "Moonbeam", "Quicksilver", "Stonefly", "Windmill", "Bluebell"),
    "research_topic": ("low-resource speech recognition", "retrieval for legal documents",
                       "sleep and memory in teenagers", "urban tree cover and heat", "crop yield forecasting",
                       "misinformation on social media", "protein stability prediction",
                       "bias in hiring algorithms", "microplastics in rivers", "remote learning outcomes",
                       "energy use in data centres", "bird migration timing"),
    "dataset": ("CivicSpeech", "RetinaScan-5k", "PolyNews", "ClinicQA", "TrafficCam-2", "LexiSum",
                "AgriYield", "SoundScape-1M", "CodeTrail", "WikiClaims", "StreetSigns-8", "ForestCover-X",
                "DialogBank", "NewsDrift", "ChemProp-20", "BirdCall-3k", "MathSteps", "LegalHold"),
    "method": ("gradient boosting", "a logistic regression baseline", "BERT fine-tuning", "random forests",
               "a two-tower retriever", "k-nearest neighbours", "contrastive pretraining", "LoRA adapters",
               "a CRF tagger", "an RBF-kernel SVM", "a GRU encoder", "a mixture of experts",
               "Bayesian optimisation", "a convolutional baseline", "label propagation",
               "distillation from a large teacher", "a linear probe", "a BM25 ranker"),
    "metric": ("macro F1", "top-5 accuracy", "BLEU", "ROUGE-L", "AUROC", "mean reciprocal rank",
               "exact match", "word error rate", "nDCG at 10", "perplexity", "Brier score",
               "mean absolute error", "recall at 100", "Spearman correlation", "expected calibration error"),
    "tradesperson": ("Brightpipe Plumbing", "FlowRight Services", "Dripstop Repairs", "Valvecraft",
                     "Pipewise and Sons", "Tapmaster", "ClearDrain Co", "Aquafix", "Plumbline Pros",
                     "Hydrohelp", "Fixflow", "Leakaway"),
    "store": ("Greenway Market", "FreshCo", "Corner Grocer", "Bayside Foods", "Maple Mart", "Harvest Lane",
              "Daily Basket", "Sunfield Grocers", "Pantry Plus", "Orchard Hall Market", "Cartwheel Foods",
              "Riverbend Co-op"),
    "company": ("Northwind Traders", "Brightline Industrial", "Cobalt Parts Co", "Delta Forge",
                "Evergreen Office", "Fulcrum Logistics", "Granite Supply", "Helix Components", "Ironclad Tools",
                "Jadeport Packaging", "Keel and Anchor", "Lumina Electrics", "Mosaic Furnishings",
                "Nordic Fasteners", "Orbit Office Supply", "Prairie Hardware", "Quantum Fixtures",
                "Redstone Wholesale"),
    "team": ("Payments Platform", "Growth Engineering", "Data Infrastructure", "Mobile Apps",
             "Security Operations", "Developer Experience", "Search Quality", "Billing Operations",
             "Design Systems", "Support Tooling", "ML Platform", "Partner Integrations"),
    "venue": ("the Riverside Pavilion", "the Glasshouse", "Cedar Barn", "the Skyline Rooftop",
              "the Old Mill Hall", "Harborview Terrace", "the Lantern Room", "Willow Court", "the Foundry Loft",
              "the Botanic Orangery", "Seabreeze Hall", "the Granary"),
    "caterer": ("Feast and Co", "Golden Ladle Catering", "Plated Events", "Spice Route Kitchen",
                "Fig and Thyme", "Morsel Catering", "The Hungry Fork", "Canape Club", "Saffron Table",
                "Crumb and Crust", "Platter Perfect", "Olive Branch Catering"),
    "band": ("DJ Nova", "the Velvet Owls", "DJ Kapow", "the Brass Foxes", "Moonlight Quartet",
             "DJ Solaris", "the Jukebox Kings", "Sunday Swing Band", "DJ Riff", "the Paper Lanterns",
             "Electric Dahlias", "the Honey Tones"),
    "street": ("Elm Street", "Harbor Road", "Birch Avenue", "Mill Lane", "Chapel Street", "Orchard Way",
               "Station Road", "Kingfisher Close", "Linden Avenue", "Quarry Lane", "Rowan Street",
               "Meadow Drive", "Foxglove Road", "Beacon Street", "Cypress Court"),
}

_VOCAB: dict[str, tuple[str, ...]] = {
    "hotel_kind": ("Hotel", "Inn", "Suites", "Lodge", "House"),
    "transport": ("a taxi", "the airport shuttle", "the express train", "a rental car", "the metro",
                  "a private driver", "the hotel van"),
    "citation": ("APA", "MLA", "Chicago", "IEEE", "Harvard", "Vancouver"),
    "font": ("Garamond", "Georgia", "Helvetica", "Source Serif", "Lato", "Palatino", "Calibri"),
    "tone": ("conversational", "formal", "technical", "upbeat", "neutral", "persuasive", "plain-spoken"),
    "issue": ("a cracked screen", "a missing charger", "double billing", "a late delivery", "the wrong size",
              "login failures", "a dead battery", "a damaged box", "a missing part", "overheating"),
    "channel": ("email", "a phone call", "text message", "live chat", "WhatsApp"),
    "plan": ("Basic", "Plus", "Premium", "Family", "Business", "Student"),
    "resolution": ("a replacement unit", "a full refund", "a partial refund", "store credit",
                   "a repair pickup", "an exchange for a new size", "a free upgrade"),
    "tracker": ("Jira", "Linear", "Asana", "Trello", "a shared spreadsheet", "Notion", "GitHub Projects"),
    "milestone": ("beta launch", "design freeze", "code complete", "the first customer pilot",
                  "security review", "public launch", "data migration"),
    "blocker": ("the vendor API delay", "missing design specs", "a flaky CI pipeline", "unclear requirements",
                "a pending legal review", "the hiring freeze", "a database migration bug"),
    "risk": ("low", "moderate", "elevated", "high", "critical", "medium-low", "medium-high"),
    "experiment": ("an ablation of the encoder", "a larger-scale rerun", "a cross-domain test",
                   "a hyperparameter sweep", "an error analysis", "a human evaluation", "a robustness check"),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "equipment": ("standing desks", "office chairs", "27-inch monitors", "label printers", "safety helmets",
                  "forklift batteries", "server racks", "conference cameras", "laptop docks"),
    "terms": ("net 30", "net 45", "net 60", "2/10 net 30", "50% upfront", "payment on delivery"),
    "freight": ("express freight", "standard ground", "air freight", "consolidated sea freight",
                "next-day courier", "a dedicated truck"),
    "device": ("a 14-inch MacBook Pro", "a ThinkPad X1 Carbon", "a Dell XPS 15", "a Framework 13",
               "a Surface Laptop", "an HP EliteBook"),
    "theme": ("black tie", "garden party", "retro disco", "cocktail attire", "casual summer",
              "masquerade", "smart casual"),
}

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")

# What the simulator's secrets look like (vendor-shaped keys and password/token phrases), so tests
# and the redaction check can recognise them.
SECRET_PATTERN = (r"(sk-live-[A-Za-z0-9]{24}|AKIA[A-Z0-9]{16}|ghp_[A-Za-z0-9]{36}|xoxb-[0-9]{10}-[A-Za-z0-9]{16}"
                  r"|eyJ[A-Za-z0-9_\-]{10}\.[A-Za-z0-9_\-]{16}\.[A-Za-z0-9_\-]{12})")
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER_NUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"  # no I/O: codes read unambiguously


def pool(name: str, split: Split) -> tuple[str, ...]:
    """A value pool restricted to ``split`` (entity pools) or whole (vocabulary pools).

    Raises:
        KeyError: unknown pool; the message lists the valid names.
    """
    if name in _NAMED:
        return split_items(_NAMED[name], split)
    if name in _VOCAB:
        return _VOCAB[name]
    raise KeyError(f"unknown pool {name!r}; valid: {sorted({**_NAMED, **_VOCAB})}")


def entity_atoms(split: Split) -> frozenset[str]:
    """Every entity-pool entry of ``split`` (the atoms composite values are built from)."""
    return frozenset(x for name in _NAMED for x in split_items(_NAMED[name], split))


def _pick(rng: np.random.Generator, seq: tuple[str, ...]) -> str:
    return seq[int(rng.integers(len(seq)))]


def _chars(rng: np.random.Generator, alphabet: str, n: int) -> str:
    return "".join(alphabet[i] for i in rng.integers(len(alphabet), size=n))


def _code(rng: np.random.Generator, pattern: str) -> str:
    return "".join(_pick(rng, tuple(_LETTERS)) if c == "A" else str(int(rng.integers(10))) if c == "9" else c
                   for c in pattern)


def _time(rng: np.random.Generator) -> str:
    h, m = int(rng.integers(7, 20)), int(rng.choice([0, 15, 30, 45]))
    return f"{(h - 1) % 12 + 1}:{m:02d} {'am' if h < 12 else 'pm'}"


def _date(rng: np.random.Generator) -> str:
    return f"{_pick(rng, _MONTHS)} {int(rng.integers(1, 29))}"


def _money(rng: np.random.Generator, lo: int, hi: int) -> str:
    v = int(rng.integers(lo, hi + 1))
    step = 50 if v >= 2000 else 10 if v >= 100 else 1
    return f"${round(v / step) * step:,}"


def _flight(rng: np.random.Generator, airline: str) -> str:
    return f"{airline} flight {airline[:2].upper()}{int(rng.integers(100, 1000))}"


_SIMPLE: dict[str, Callable[[np.random.Generator, Split], str]] = {
    "person": lambda r, s: f"{_pick(r, pool('first', s))} {_pick(r, pool('last', s))}",
    "first": lambda r, s: _pick(r, pool("first", s)),
    "hotel": lambda r, s: f"the {_pick(r, pool('hotel_word', s))} {_pick(r, pool('hotel_kind', s))}",
    "flight": lambda r, s: _flight(r, _pick(r, pool("airline", s))),
    "address": lambda r, s: f"{int(r.integers(2, 240))} {_pick(r, pool('street', s))}, {_pick(r, pool('city', s))}",
    "paper": lambda r, s: f"{_pick(r, pool('last', s))} et al. ({int(r.integers(2015, 2025))})",
    "date": lambda r, s: _date(r),
    "time": lambda r, s: _time(r),
    "datetime": lambda r, s: f"{_date(r)} at {_time(r)}",
}


def _draw_once(spec: str, rng: np.random.Generator, split: Split) -> str:
    if spec in _SIMPLE:
        return _SIMPLE[spec](rng, split)
    head, _, rest = spec.partition(":")
    args = rest.split(":") if rest else []
    if head == "pool":
        return _pick(rng, pool(args[0], split))
    if head == "money":
        return _money(rng, int(args[0]), int(args[1]))
    if head == "count":
        n = int(rng.integers(int(args[0]), int(args[1]) + 1))
        return f"{n} {args[2]}" if len(args) > 2 else str(n)
    if head == "float":
        return f"{rng.uniform(float(args[0]), float(args[1])):.3f}"
    if head == "code":
        return _code(rng, rest)
    raise ValueError(f"unknown value spec {spec!r} (see train.simulate.pools docstring for the grammar)")


def validate_spec(spec: str) -> None:
    """Raise ``ValueError``/``KeyError`` if ``spec`` cannot produce a value (checked at family load)."""
    rng = np.random.default_rng(0)
    for split in ("train", "eval"):
        _draw_once(spec, rng, split)  # type: ignore[arg-type]


def draw_value(spec: str, rng: np.random.Generator, split: Split, avoid: Collection[str] = (),
               tries: int = 12) -> str:
    """Draw one value for ``spec``, avoiding ``avoid`` when the pool allows (else a repeat is returned).

    Small vocabulary pools can run out inside one episode; a repeat is then better than a failure.
    """
    v = _draw_once(spec, rng, split)
    for _ in range(tries):
        if v not in avoid:
            return v
        v = _draw_once(spec, rng, split)
    return v


def secret_string(rng: np.random.Generator) -> str:
    """A fake credential in one of several vendor shapes (matches :data:`SECRET_PATTERN`)."""
    k = int(rng.integers(5))
    if k == 0:
        return "sk-live-" + _chars(rng, _ALNUM, 24)
    if k == 1:
        return "AKIA" + _chars(rng, _UPPER_NUM, 16)
    if k == 2:
        return "ghp_" + _chars(rng, _ALNUM, 36)
    if k == 3:
        return f"xoxb-{_chars(rng, '0123456789', 10)}-{_chars(rng, _ALNUM, 16)}"
    b64 = _ALNUM + "_-"
    return f"eyJ{_chars(rng, b64, 10)}.{_chars(rng, b64, 16)}.{_chars(rng, b64, 12)}"

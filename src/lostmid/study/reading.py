"""The one reading of a plan's primaries (study/plan.yaml, plan2.yaml, fix_plan.yaml: ``outcomes`` and
``multiplicity``): each primary read by the reading function its plan module registers (``READINGS``, keyed by the
dotted path of the estimator the plan names) into a ``Read``; Holm's levels across the primaries; a primary's
outcome read off its interval (``lostmid.stats.outcomes``: against 0 and the size, or the fix plan's two-sided
one); a fix arm's ``Gate``; and the words and numbers of an answer as the findings pages print them, its size
labelled."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from lostmid.errors import InputError
from lostmid.stats.outcomes import AT_LEAST, INCONCLUSIVE, NO_EFFECT, SMALLER, oriented, outcome

EXPLORATORY = "exploratory"  # every outcome and answer of a run the plan check does not call primary
NOT_YET_RUN = "not yet run"
NOT_BUILT = "the fix could not be built for this network"
GATED = "undecided: the arm failed its gate"
SHOWN_ABSENT = "shown absent"  # plan2 outcomes.absent: an equivalence primary's two one-sided tests
NOT_SHOWN_ABSENT = "not shown absent"  # plan2 outcomes.not_shown_absent
SOURCE = "source"  # a size label: the source's own number
DEFAULT_SIZE_LABEL = "our margin"  # the size label of a plan that labels none (study/plan.yaml)
SOURCE_SIZE = "the source's size"  # how a sentence names the size, ``labelled``


# The answer's words: how a sentence of docs/findings.md opens for each outcome, and how its row of the findings'
# forest plot is coloured (lostmid.plots.findings keys its colours by these very words).
ANSWERS = {
    AT_LEAST: "Yes, at least as large as the source says",
    SMALLER: "Yes, but smaller than the source says",
    NO_EFFECT: "No effect of the source's size",
    INCONCLUSIVE: "Not decided by this run",
}
OTHER_SIDE = " (on the other side of 0)"
IN_DIRECTION = "An effect in the source's direction, its size against the source's not decided by this run"


def answer(outcome: str, low: float, high: float, direction: str) -> str:
    """The words of an answer, as its sentence opens and its figure colours it: the outcome's ANSWERS, on the
    other side of 0 where the interval is, an effect of undecided size where an inconclusive interval excludes 0
    in the source's direction."""
    oriented_low, oriented_high = oriented(low, high, direction)
    words = ANSWERS[outcome]
    if oriented_high < 0:
        return words + OTHER_SIDE
    if outcome == INCONCLUSIVE and oriented_low > 0:
        return IN_DIRECTION
    return words


def exploratory(outcome: str, sentence: str) -> tuple[str, str]:
    """An outcome and its sentence as read from a run the plan check does not call primary."""
    return f"{EXPLORATORY}: {outcome}", f"{EXPLORATORY.capitalize()}, not primary: {sentence}"


def holm_levels(p_values, alpha: float = 0.05) -> list[float]:
    """Each primary's error level by Holm's step-down: sorted ascending, rank r (1-based) of k is compared with
    alpha / (k - r + 1); every primary up to and including the first not rejected gets the level of its own rank,
    every later one that first non-rejected one's. Ties keep the order given. Its interval is read at 1 - level."""
    p = [float(x) for x in p_values]
    if any(math.isnan(x) or not 0 <= x <= 1 for x in p):
        raise ValueError(f"p-values must lie in [0, 1], got {p}")
    k = len(p)
    levels = [0.0] * k
    stopped = None
    for rank, index in enumerate(sorted(range(k), key=lambda i: p[i]), start=1):
        level = alpha / (k - rank + 1) if stopped is None else stopped
        levels[index] = level
        if stopped is None and p[index] > level:
            stopped = level
    return levels


def number(x: float, spec: str = ".3g") -> str:
    """A number as the pages print it: three significant digits (or the format ``spec``, e.g. "+.2f": signed, two
    decimals), "nan" where there is none."""
    return "nan" if math.isnan(x) else f"{x:{spec}}"


def bounded(estimate: float, low: float, high: float, spec: str = ".3g") -> str:
    """ "estimate [low, high]", each a ``number`` in the format ``spec``."""
    return f"{number(estimate, spec)} [{number(low, spec)}, {number(high, spec)}]"


def text(value) -> str:
    """A plan's folded string on one line."""
    return " ".join(str(value).split())


def numbers(effect, low: float, high: float, primary: dict, confidence: float, units: str | None = None) -> str:
    """ "estimate [low, high] scale (confidence interval over n units: unit" (the caller closes the bracket)."""
    return (
        f"{bounded(effect.estimate, low, high)} {primary['scale']} ({confidence:.4g} interval "
        f"over {effect.n} units: {units or text(primary['unit'])}"
    )


# --------------------------------------------------------------------------- the gate and the read primary


@dataclass
class Missing(Exception):
    """A primary without an estimate: ``kind`` its outcome (NOT_YET_RUN, NOT_BUILT, the fix plan's "no decision"),
    ``why`` says more. Raised where a reading finds it; a read primary holds it as its effect, with p = 1."""

    kind: str
    why: str


@dataclass(frozen=True)
class Gate:
    """A fix arm's gate: its fits, those that passed (the fit checks of lostmid.evidence.fit_checks on the model it
    trains), how many it needs, and why each other one failed (None for one that passed)."""

    arm: str
    fits: list
    passed: list
    required: int
    reasons: dict

    @classmethod
    def of(cls, arm: str, reasons: dict, required: int) -> Gate:
        """The gate of ``arm`` from each of its fits' reasons (``fit_reasons``: None where the fit passed)."""
        return cls(arm, list(reasons), [fit for fit, why in reasons.items() if why is None], required, reasons)

    @property
    def decided(self) -> bool:
        return len(self.passed) >= self.required

    @property
    def used(self) -> list:
        """The fits its primaries read: those that passed when the arm is decided, else all (exploratory)."""
        return self.passed if self.decided else self.fits

    def words(self) -> str:
        said = f"{len(self.passed)} of {len(self.fits)} fits of {self.arm} pass the gate (at least {self.required})"
        failed = sorted({why for why in self.reasons.values() if why})
        return said + (f"; the others: {'; '.join(failed)}" if failed else "")


@dataclass(frozen=True)
class Read:
    """One primary of a plan, read: what its reading found (the effect, or Missing; the p that enters Holm; a fix
    arm's gate; a note the page prints beside; study 2's three influence fits; the fix plan's paired windows; the
    step its sentence names, where it names one), then what the Holm loop adds (``read_primaries``: its level, the
    interval at it, its outcome and its sentence)."""

    primary: dict
    effect: object
    p: float = 1.0
    gate: Gate | None = None
    note: str = ""
    fits: dict | None = None
    windows: int = 0
    step: int | None = None
    level: float = math.nan
    low: float = math.nan
    high: float = math.nan
    outcome: str = ""
    sentence: str = ""

    @property
    def id(self) -> str:
        return self.primary["id"]

    @property
    def question(self) -> str:
        return text(self.primary["question"])

    @property
    def decided(self) -> bool:
        """An estimate, and a gate (where it has one) that passed."""
        return not isinstance(self.effect, Missing) and (self.gate is None or self.gate.decided)

    @property
    def why(self) -> str:
        """Why it has no estimate ("" where it has one)."""
        return self.effect.why if isinstance(self.effect, Missing) else ""


def step_of(primary: dict, plan: dict):
    """The primary's step: its checkpoint, the plan's checkpoint of that name, or the plan's horizon for an area over
    training ("0-1500 (area)"); None where it names no step (the pretrained model)."""
    checkpoint = primary.get("checkpoint")
    if checkpoint is None or isinstance(checkpoint, int):
        return checkpoint
    named = plan["checkpoints"]
    return named.get(checkpoint, named["horizon"] if "(area)" in checkpoint else None)


def step_words(primary: dict, step: int) -> str:
    """How a sentence names its step (at a checkpoint, or over training up to it) and, where the primary reads a
    fix against its baseline or a fix arm alone (an equivalence), the arms it reads: two estimands of one scale
    ("failure rate (late minus early)") are then told apart in the sentence itself."""
    when = f"At step {step}" if isinstance(primary["checkpoint"], int) else f"Over steps 0-{step}"
    arms = primary.get("arms", [])
    if len(arms) == 2:
        return f"{when}, {arms[0]} minus {arms[1]}"
    return f"{when}, {arms[0]} alone" if primary.get("reading") == "equivalence" else when


# --------------------------------------------------------------------------- the Holm loop

# Every plan's reading functions, by the dotted path of the estimator its plan names (each plan's module registers
# its own): fn(record, plan, primary) -> Read, its effect and the p that enters Holm.
READINGS = {}


def interval_outcome(read: Read, plan: dict, level: float) -> tuple[float, float, str]:
    """(low, high, outcome) of a read primary at its Holm ``level``: a missing one's kind, no interval; a gated one's
    numbers over all its fits at the plan's level, GATED; else its interval at 1 - level read by the four outcomes."""
    if isinstance(read.effect, Missing):
        return math.nan, math.nan, read.effect.kind
    if not read.decided:
        return (*read.effect.interval(plan["level"]), GATED)
    low, high = read.effect.interval(1 - level)
    return low, high, outcome(low, high, read.primary["direction"], read.primary["size"])


def read_primaries(
    plan: dict, record, primary_status: bool = True, readers=READINGS, rule=interval_outcome, label=None
) -> list[Read]:
    """Every primary of ``plan``, read from ``record`` by the reading of the estimator it names (``readers``): Holm's
    levels over all of them (p = 1 where there is no decision: each keeps its place in k), each interval and outcome
    at its level (``rule``), its sentence (sizes by ``label``, else each primary's own; none for a primary without a
    size: the fix plan's page words its margins); exploratory words everywhere unless ``primary_status``."""
    found = []
    for primary in plan["primaries"]:
        name = primary.get("estimator_path", primary["estimator"])
        if name not in readers:
            raise InputError(f"plan primary {primary['id']}: no reading of the estimator {name}")
        found.append(readers[name](record, plan, primary))
    out = []
    for read, level in zip(found, holm_levels([read.p for read in found], plan["alpha"])):
        low, high, outcome = rule(read, plan, level)
        read = replace(read, level=level, low=low, high=high, outcome=outcome)
        said = sentence(read, plan, label) if "size" in read.primary else ""
        if not primary_status:
            outcome, said = exploratory(outcome, said)
        out.append(replace(read, outcome=outcome, sentence=said))
    return out


# --------------------------------------------------------------------------- the sentence


def size_label(primary: dict, plan: dict) -> str:
    """The primary's size label: its own (plan2: ``size_label``), else the plan's, else our margin (study 1's plan
    labels none, and none of its sizes is a number in a source's words)."""
    return primary.get("size_label", plan.get("size_label", DEFAULT_SIZE_LABEL))


# The words of an answer or an outcome for a size that is not the source's: each phrase in turn, replaced.
MARGIN_WORDS = (
    ("as large as the source says", "as large as {label}"),
    ("smaller than the source says", "smaller than {label}"),
    ("of the source's size", "as large as {label}"),
    ("the source's size", "{label}"),
    ("smaller than the source's", "smaller than {label}"),
    ("the source's direction", "the claim's direction"),
    ("against the source's", "against {label}"),
)


def labelled(words: str, label: str) -> str:
    """Words of this module with the source's size named by its label where it is not the source's."""
    if label != SOURCE:
        for phrase, replacement in MARGIN_WORDS:
            words = words.replace(phrase, replacement.format(label=label))
    return words


def sentence_opening(read: Read) -> str:
    """How a read primary's sentence opens: its step and arms (``step_words``) and a colon; "" where it names none."""
    return "" if read.step is None else f"{step_words(read.primary, read.step)}: "


def sentence(read: Read, plan: dict, label: str | None = None) -> str:
    """The answer in one sentence: its step where the reading names one, the outcome's words, the estimate, its
    interval and what it rests on, the size by ``label`` (else the primary's own label); a gated arm's numbers over
    all its fits, exploratory; an equivalence primary's interval at 1 - 2 alpha_i; study 2's three influence fits."""
    primary, effect, low, high = read.primary, read.effect, read.low, read.high
    opening = sentence_opening(read)
    if isinstance(effect, Missing):
        return f"{opening}No answer: {effect.kind}."
    label, size = label or size_label(primary, plan), primary["size"]
    units = None if read.gate is None else f"fits of B, {len(read.gate.used)} fits x their seeds"
    if not read.decided:
        return (
            f"{opening}undecided, the arm failed its gate ({read.gate.words()}); exploratory, over all its fits: "
            f"{numbers(effect, low, high, primary, plan['level'], units)})."
        )
    outcome = read.outcome.removeprefix(f"{EXPLORATORY}: ")
    absence = outcome in (SHOWN_ABSENT, NOT_SHOWN_ABSENT)
    said = numbers(effect, low, high, primary, 1 - (2 * read.level if absence else read.level), units)
    if absence:
        past = [f"{sign}{size:.3g}" for sign, out in (("-", low <= -size), ("+", high >= size)) if out]
        side = f"; it reaches past {' and '.join(past)}" if past else ""
        return f"{opening}{outcome} at {label} +-{size:.3g}: {said}{side})."
    words = labelled(answer(outcome, low, high, primary["direction"]), label)
    tail = ""
    if read.fits is not None:
        each = ", ".join(f"{name} {bounded(e.estimate, *e.interval(1 - read.level))}" for name, e in read.fits.items())
        tail = f"; {each}; no effect stands only where all three read it"
    return f"{opening}{words}: {said}; {labelled(SOURCE_SIZE, label)} {size:.3g}{tail})."

"""What a whole-source import could not find, and when that refuses the set.

An input is *missing* when the source lists something the import cannot use as given: a listed audio file
that is not there (or a row with no file), an audio file with no transcript, an empty transcript
(``is_missing``: all of it known from the source's listing, before any audio is decoded), and a listed file that
holds no audio (0 bytes, not audio, corrupt: ``audio.UnreadableAudio``, found when it is decoded). Audio that is
there but unusable otherwise (silent, implausible) is judged elsewhere.

An evaluation set imported whole stands for its source ("test-clean"): WER on "test-clean minus some files"
is comparable with nothing. So such an import is refused when more inputs are missing than
``--allow-missing`` accepts (default 0), naming the first few and the count; an accepted shortfall is
recorded in the set's card (``checks.missing``) and said by every sign-off report that uses the set
(``report_note``). A calibration set, or a seeded sample (``--take``), keeps skipping them with reasons.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.errors import WorkbenchError
from workbench.speech.entries import Entry
from workbench.speech.records import Skipped

SHOWN = 3  # missing inputs named in the refusal
KEPT = 50  # missing inputs listed in the card (all are in its skip list too)


def is_missing(entry: Entry) -> bool:
    """The source lists this input but its audio file or its transcript is not there."""
    text = entry.text
    return entry.problem is not None or entry.audio is None or text is None or not str(text).strip()


def reason_of(entry: Entry) -> str:
    """Why a missing input is missing (the same words its skip reason uses)."""
    if entry.problem:
        return entry.problem
    if entry.audio is None:
        return "no audio"
    return "no transcript" if entry.text is None else "empty transcript"


def must_be_whole(role: str, take: int | None) -> bool:
    """Whether an import stands for its whole source: an evaluation set that is not a sample."""
    return role == "eval" and take is None


def refuse_if_incomplete(name: str, missing: Sequence[Skipped], listed: int, allowed: int) -> None:
    """Refuse an evaluation set with more missing inputs than ``allowed``, naming the first few."""
    if len(missing) <= allowed:
        return
    shown = "; ".join(f"{s.item}: {s.reason}" for s in missing[:SHOWN])
    more = f"; and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
    accepted = f" (--allow-missing {allowed} accepts fewer)" if allowed else ""
    raise WorkbenchError(
        f"evaluation set {name}: {len(missing)} of the {listed} utterances in its source have no audio file, "
        f"no readable audio or no transcript{accepted}"
        f" ({shown}{more}); a set that stands for its source must be whole: restore them, or pass "
        f"--allow-missing {len(missing)} to import it without them (the count is recorded in the set's card "
        "and in every report that uses it); nothing was written"
    )


def card_record(missing: Sequence[Skipped], listed: int, allowed: int | None) -> dict[str, Any]:
    """``checks.missing`` of a set's card (``allowed`` None: a calibration set or a sample, never refused)."""
    return {
        "count": len(missing),
        "listed": listed,
        "allowed": allowed,
        "items": [{"item": s.item, "reason": s.reason} for s in missing[:KEPT]],
    }


def report_note(name: str, card: dict[str, Any], role: str) -> str | None:
    """One line for a report that uses the set: how many of its source's utterances it lacks; None when whole."""
    found = (card.get("checks") or {}).get("missing")
    if not isinstance(found, dict) or not found.get("count"):
        return None
    items = [f"{i.get('item')}" for i in (found.get("items") or [])[:SHOWN] if isinstance(i, dict)]
    allowed = found.get("allowed")
    how = f"accepted with --allow-missing {allowed}" if allowed is not None else "skipped"
    return (
        f"{role} {name} lacks {found['count']} of the {found.get('listed', '?')} utterances in its source "
        f"(no audio file or no transcript; {how}; e.g. {', '.join(items)}): its WER is not the whole source's"
    )

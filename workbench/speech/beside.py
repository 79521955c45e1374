"""Whether a stored calibration set is the one a synthetic build would make again, so a build can reuse it.

A numbered draw (``SetBuildConfig.draw``) keeps the calibration set's bytes and draws new evaluation and dev sets;
synthesising those calibration clips again for every draw only to find the same bytes costs a share of each draw.
``check_beside`` lets the builder reuse a stored calibration set instead (``build_synthetic_sets(calib=...)``): the
set must be synthetic speech made for calibration with the same seed, size per condition, engine profile, condition
ranges, recorded noise, voices and dev split (the dev split moves speakers out of calibration), and every utterance
must be one of the build's calibration slots (its id), with a text and speaker that slot offers; every slot is in the
set or among its skipped inputs. Anything else is a user error naming what differs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from workbench.errors import WorkbenchError
from workbench.speech.store import SpeechSet
from workbench.speech.synthetic import SlotJob

# the build settings that decide the calibration clips (the draw, name, evaluation and dev sizes do not)
CALIBRATION_SETTINGS = ("seed", "calib_per_condition", "profile", "conditions", "noise_dir")


def _as_stored(value: Any) -> Any:
    """A setting as a card stores it (paths as text, tuples as lists)."""
    return json.loads(json.dumps(value, default=str))


def check_beside(
    stored: SpeechSet, config: dict[str, Any], voices: Sequence[str], calib_jobs: Sequence[SlotJob]
) -> None:
    """Refuse ``stored`` unless it is the calibration set that ``config`` (a ``SetBuildConfig`` as a dict, its profile
    fixed) synthesises with ``voices`` (the basic voices' speakers) from ``calib_jobs`` (the build's calibration
    slots)."""
    made = stored.card.get("made", {})
    made_config = made.get("config", {})
    differs = [
        f"{key} {made_config.get(key)!r} (this build: {_as_stored(config[key])!r})"
        for key in CALIBRATION_SETTINGS
        if made_config.get(key) != _as_stored(config[key])
    ]
    if made.get("role") != "calib" or made.get("source") != "synthetic":
        differs.insert(0, f"made as {made.get('source')} {made.get('role')} set, not synthetic calibration")
    if bool(made_config.get("dev_per_condition")) != bool(config["dev_per_condition"]):
        differs.append(
            "built " + ("with" if made_config.get("dev_per_condition") else "without") + " a dev set"
        )
    if made.get("voices") != list(voices):
        differs.append(f"voices {made.get('voices')} (this build: {list(voices)})")
    slots = {job.slot.key: job for job in calib_jobs}
    strays = []
    for utt in stored.utterances:
        job = slots.get(utt.id)
        if job is None or utt.text not in job.texts or utt.speaker not in {v.speaker for v in job.voices}:
            strays.append(utt.id)
    if strays:
        differs.append(
            f"{len(strays)} utterances no calibration slot of this build makes (first {strays[0]})"
        )
    elif len(stored.utterances) + len(stored.card.get("skipped", [])) != len(slots):
        differs.append(
            f"{len(stored.utterances)} utterances and {len(stored.card.get('skipped', []))} skipped for "
            f"{len(slots)} calibration slots"
        )
    if differs:
        raise WorkbenchError(
            f"{stored.name} is not the calibration set this build makes: {'; '.join(differs)}; build the sets "
            "without it (the calibration set is synthesised again)"
        )

"""Which synthetic voices the demo model trains on, and which whole voices stay out for testing.

Training draws on every English accent espeak-ng offers with every voice variant it ships (a few variants
held out), espeak-ng's voices of other languages reading English (three languages held out), every flite
voice, and (from stage 4) festival's voices of other languages reading English: two Italian diphone voices
(the engine family of the held-out English diphone voices), a Catalan HTS voice (the engine of the held-out
HTS voice) and a Finnish diphone voice. Held out, never heard in training: festival's English voices (two
diphone voices and the HTS voice of ``festvox-us-slt-hts``), espeak-ng's Dutch, Polish and Swahili voices
reading English, and five espeak-ng variants on the English accents.
"""

from __future__ import annotations

import os
import shutil
from functools import lru_cache
from pathlib import Path

from workbench.speech.tts import ESPEAK_ACCENTS, Voice, espeak_variant_files

OTHER_LANGUAGES: tuple[str, ...] = (
    "af", "cs", "cy", "da", "de", "eo", "es", "es-419", "et", "fi", "fr-fr", "hr", "hu", "id", "is", "it",
    "lt", "lv", "ms", "nb", "pt", "pt-br", "ro", "sk", "sl", "sq", "sv", "tr", "vi", "ga",
)  # fmt: skip
HELD_OUT_LANGUAGES: tuple[str, ...] = ("nl", "pl", "sw")
HELD_OUT_VARIANTS: tuple[str, ...] = ("Andrea", "Annie", "david", "linda", "max")
FLITE_TRAINING_VOICES: tuple[str, ...] = ("kal", "kal16", "awb", "rms", "slt")
FESTIVAL_HELD_OUT: tuple[str, ...] = ("kal_diphone", "ked_diphone", "cmu_us_slt_arctic_hts")
# festival voices of other languages reading English (Debian festvox-italp16k, festvox-itapc16k,
# festvox-ca-ona-hts, festvox-suopuhe-mv); each was checked to speak an English sentence through text2wave.
# Left out: the Hindi, Marathi and Telugu NSK voices (festival crashes on English text), the Russian voice
# (178 MB package) and the Czech and second Finnish voice (the device call's 64 MiB carry).
FESTIVAL_TRAINING_VOICES: tuple[str, ...] = ("lp_diphone", "pc_diphone", "upc_ca_ona_hts", "hy_fi_mv_diphone")
BASIC_VARIANTS: tuple[str, ...] = ("m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5")


@lru_cache(maxsize=1)
def espeak_variants() -> tuple[str, ...]:
    """espeak-ng's voice variants (``espeak-ng --voices=variant``), names with spaces left out."""
    if shutil.which("espeak-ng") is None:
        return ()
    names = set(espeak_variant_files()) | set(BASIC_VARIANTS)
    return tuple(sorted(n for n in names if " " not in n and n))


def festival_voice_installed(name: str) -> bool:
    """Whether festival has voice ``name`` (``<voices>/<language>/<name>``, in /usr/share/festival/voices or
    ``FESTIVAL_VOICES``)."""
    roots = [Path("/usr/share/festival/voices"), Path(os.environ.get("FESTIVAL_VOICES", "/nonexistent"))]
    return any(root.is_dir() and any(root.glob(f"*/{name}")) for root in roots)


def training_voice_pools() -> dict[str, tuple[Voice, ...]]:
    """Voices per pool: ``english`` (espeak accents x variants), ``languages``, ``flite``, ``festival`` (festival's
    other-language voices installed here; the share of a pool with no voices goes to the others)."""
    variants = [v for v in espeak_variants() if v not in HELD_OUT_VARIANTS]
    english = tuple(
        Voice("espeak", name, v, accent) for name, accent in ESPEAK_ACCENTS.items() for v in variants
    )
    languages = tuple(
        Voice("espeak", lang, v, "other-language") for lang in OTHER_LANGUAGES for v in variants
    )
    flite = (
        tuple(Voice("flite", name, "", "us") for name in FLITE_TRAINING_VOICES)
        if shutil.which("flite")
        else ()
    )
    festival = (
        tuple(
            Voice("festival", name, "", "other-language")
            for name in FESTIVAL_TRAINING_VOICES
            if festival_voice_installed(name)
        )
        if shutil.which("festival")
        else ()
    )
    assert not set(FESTIVAL_TRAINING_VOICES) & set(FESTIVAL_HELD_OUT)
    return {"english": english, "languages": languages, "flite": flite, "festival": festival}


def held_out_voices() -> dict[str, tuple[Voice, ...]]:
    """Whole voices never used in training, per family."""
    festival = tuple(Voice("festival", name, "", "us") for name in FESTIVAL_HELD_OUT)
    languages = tuple(
        Voice("espeak", lang, v, "other-language") for lang in HELD_OUT_LANGUAGES for v in BASIC_VARIANTS
    )
    variants = tuple(
        Voice("espeak", name, v, accent) for name, accent in ESPEAK_ACCENTS.items() for v in HELD_OUT_VARIANTS
    )
    return {"festival": festival, "espeak-languages": languages, "espeak-variants": variants}

"""Every engine speaks at the rate a clip's record says, and a record claims a pitch only where the engine set it:
the real synthesisers (espeak-ng, flite, festival's text2wave), skipped where one is not installed."""

from __future__ import annotations

import pytest

from workbench.speech.tts import Prosody, Voice, applies_pitch, available_voices, synthesize

TEXT = "the quick brown fox jumps over the lazy dog near the river bank"


def one_voice_of(engine: str) -> Voice:
    voices = [v for v in available_voices() if v.engine == engine]
    if not voices:
        pytest.skip(f"no {engine} voice installed (run ./setup.sh)")
    return voices[0]


@pytest.mark.parametrize("engine", ["espeak", "flite", "festival"])
def test_a_slower_rate_gives_a_longer_clip(engine: str) -> None:
    voice = one_voice_of(engine)
    slow = synthesize(voice, TEXT, Prosody(rate=0.7))
    fast = synthesize(voice, TEXT, Prosody(rate=1.4))
    # twice the rate: well under the slow clip's length (silence trimmed either way)
    assert len(fast) < 0.75 * len(slow), (voice.speaker, len(slow), len(fast))


def test_records_claim_a_pitch_only_where_the_engine_sets_it(tiny_sets) -> None:
    utterances = tiny_sets.calib.utterances + tiny_sets.eval.utterances
    engines = {u.speaker.split(":")[0] for u in utterances}
    for u in utterances:
        is_festival = u.speaker.startswith("festival:")
        assert (u.extra["pitch"] is None) == is_festival, u.speaker
        assert isinstance(u.extra["rate"], float)
    assert applies_pitch(Voice("espeak", "en-us", "", "us")) and not applies_pitch(
        Voice("festival", "x", "", "us")
    )
    if "festival" not in engines:
        pytest.skip("the tiny sets drew no festival voice")

"""A clip's record claims a speaking rate and pitch only where the engine applied them: espeak-ng and flite speak
at the rate asked for; festival's voices keep their own, so their records say None. The real synthesisers,
skipped where one is not installed."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.speech.tts import Prosody, Voice, applies_prosody, available_voices, synthesize

TEXT = "the quick brown fox jumps over the lazy dog near the river bank"


def one_voice_of(engine: str) -> Voice:
    voices = [v for v in available_voices() if v.engine == engine]
    if not voices:
        pytest.skip(f"no {engine} voice installed (run ./setup.sh)")
    return voices[0]


@pytest.mark.parametrize("engine", ["espeak", "flite"])
def test_a_slower_rate_gives_a_longer_clip(engine: str) -> None:
    voice = one_voice_of(engine)
    assert applies_prosody(voice)
    slow = synthesize(voice, TEXT, Prosody(rate=0.7))
    fast = synthesize(voice, TEXT, Prosody(rate=1.4))
    # twice the rate: well under the slow clip's length (silence trimmed either way)
    assert len(fast) < 0.75 * len(slow), (voice.speaker, len(slow), len(fast))


def test_festival_speaks_at_its_own_rate_and_says_so() -> None:
    voice = one_voice_of("festival")
    assert not applies_prosody(voice)
    slow = synthesize(voice, TEXT, Prosody(rate=0.7, pitch=20))
    fast = synthesize(voice, TEXT, Prosody(rate=1.4, pitch=80))
    np.testing.assert_array_equal(slow, fast)


def test_records_claim_rate_and_pitch_only_where_the_engine_applied_them(tiny_sets) -> None:
    utterances = tiny_sets.calib.utterances + tiny_sets.eval.utterances
    for u in utterances:
        festival = u.speaker.startswith("festival:")
        assert (u.extra["rate"] is None) == festival and (u.extra["pitch"] is None) == festival, u.speaker
    if not any(u.speaker.startswith("festival:") for u in utterances):
        pytest.skip("the tiny sets drew no festival voice")

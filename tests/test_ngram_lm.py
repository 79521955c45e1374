"""The n-gram language model writer: KenLM reads the ARPA file back as a proper distribution, the estimate
matches interpolated Kneser-Ney by hand, and beam search with the model prefers the words it has seen."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.errors import WorkbenchError
from workbench.evaluate.decoders import decoder_for
from workbench.evaluate.inference import DecoderSettings
from workbench.evaluate.ngram import EOS, UNK, build_arpa, estimate
from workbench.model.vocab import DEFAULT_VOCABULARY, VOCAB
from workbench.optional import has_module

kenlm_missing = pytest.mark.skipif(
    not has_module("flashlight.lib.text.decoder.kenlm"),
    reason="flashlight-text (KenLM inside) is not installed (setup.sh installs it)",
)
TEXTS = [
    "THE CAT SAT ON THE MAT",
    "THE DOG SAT ON THE LOG",
    "A CAT AND A DOG",
    "THE CAT ATE",
    "ON THE MAT THE CAT SLEPT",
]


@kenlm_missing
@pytest.mark.parametrize("order", [2, 3, 4])
def test_kenlm_reads_a_distribution_in_every_context(tmp_path, order) -> None:
    from flashlight.lib.text.decoder.kenlm import KenLM
    from flashlight.lib.text.dictionary import Dictionary

    from workbench.quiet import native_output_silenced

    path = tmp_path / "lm.arpa"
    build_arpa(TEXTS, path, order)
    vocabulary = sorted({w for t in TEXTS for w in t.split()} | {UNK}) + ["ZEBRA"]
    ids = {w: i for i, w in enumerate(vocabulary)}
    with native_output_silenced():
        lm = KenLM(str(path), Dictionary(vocabulary))
    for context in ([], ["THE"], ["THE", "CAT"], ["ON", "THE"], ["MAT", "THE", "CAT"], ["ZEBRA"]):
        state = lm.start(False)
        for word in context:
            state = lm.score(state, ids[word])[0]
        words = sum(10 ** lm.score(state, ids[w])[1] for w in vocabulary if w not in (UNK, "ZEBRA"))
        total = words + 10 ** lm.score(state, ids[UNK])[1] + 10 ** lm.finish(state)[1]  # ... and </s>
        assert total == pytest.approx(1.0, abs=1e-4), context


def test_bigram_estimate_by_hand() -> None:
    """Two sentences 'A B' and 'A C': p(B | A) = (1 - D2)/2 + gamma(A) p(B)."""
    model = estimate(["A B", "A C"], order=2)
    # unigram adjusted counts: A:1 (after <s> only: one left extension), B:1, C:1, </s>:2 (after B, C)
    d1 = 3 / (3 + 2 * 1)  # counts of counts over {1, 1, 1, 2}: n1 = 3, n2 = 1
    total = 5
    vocab = 5  # A, B, C, </s>, <unk>
    gamma0 = d1 * 4 / total
    p_b = (1 - d1) / total + gamma0 / vocab
    assert 10 ** model.logprob[0][("B",)] == pytest.approx(p_b)
    d2 = 4 / (4 + 2 * 1)  # bigram counts (raw at the top order): <s> A: 2, A B, A C, B </s>, C </s>: 1
    p_b_a = (1 - d2) / 2 + (d2 * 2 / 2) * p_b
    assert 10 ** model.logprob[1][("A", "B")] == pytest.approx(p_b_a)
    assert 10 ** model.backoff[0][("A",)] == pytest.approx(d2 * 2 / 2)
    assert math.isclose(sum(10 ** model.logprob[0][(w,)] for w in ("A", "B", "C", EOS, UNK)), 1.0)


def test_no_text_is_refused() -> None:
    with pytest.raises(WorkbenchError, match="no text"):
        estimate(["", "  "])


@kenlm_missing
def test_language_model_steers_the_beam(tmp_path) -> None:
    """Frames that read 'THE CAT' or 'THE CUT' equally well: the LM trained on cats picks CAT."""
    path = tmp_path / "lm.arpa"
    build_arpa(TEXTS * 3, path, 3)
    v = VOCAB
    ids = [v[c] for c in "THE"] + [v["|"], v["C"], v["A"], v["T"]]
    logits = np.zeros((len(ids), len(VOCAB)), dtype=np.float32)
    logits[np.arange(len(ids)), ids] = 5.0
    logits[5, v["U"]] = 5.2  # acoustically CUT wins by a little
    no_lm = decoder_for(DecoderSettings("beam", beam_width=16), DEFAULT_VOCABULARY)
    with_lm = decoder_for(DecoderSettings("beam", beam_width=16, lm=path, alpha=1.0), DEFAULT_VOCABULARY)
    assert no_lm(logits) == "THE CUT" and with_lm(logits) == "THE CAT"


def _speech_like_logits(text: str, rng: np.random.Generator) -> np.ndarray:
    """CTC-shaped logits for ``text``: each character held 1-3 frames, runs of 1-6 blank frames between them (a
    blank between doubled letters), and now and then a rival character close behind the right one."""
    v = VOCAB
    frames: list[tuple[int, int | None]] = []
    for ch in text.replace(" ", "|"):
        frames += [(0, None)] * int(rng.integers(1, 7))
        rival = int(rng.integers(4, len(VOCAB))) if rng.random() < 0.3 else None
        frames += [(v[ch], rival)] * int(rng.integers(1, 4))
    frames += [(0, None)] * int(rng.integers(1, 7))
    logits = rng.normal(0.0, 1.0, (len(frames), len(VOCAB))).astype(np.float32)
    for row, (best, rival) in enumerate(frames):
        logits[row, best] += 12.0
        if rival is not None:
            logits[row, rival] += 11.0
    return logits


@kenlm_missing
def test_collapsed_blank_runs_decode_like_every_frame(tmp_path) -> None:
    """Beam search over the collapsed frames gives the text it gives over every frame (with and without the LM),
    on logits where dropping a whole blank run would merge doubled letters and ambiguous frames abound."""
    from workbench.evaluate.decoders import blank_only_frames, collapse_blank_runs, log_softmax

    path = tmp_path / "lm.arpa"
    build_arpa(TEXTS * 3, path, 3)
    rng = np.random.default_rng(0)
    kept = total = 0
    for settings in (DecoderSettings("beam", beam_width=8), DecoderSettings("beam", beam_width=8, lm=path)):
        fast = decoder_for(settings, DEFAULT_VOCABULARY)
        full = decoder_for(settings, DEFAULT_VOCABULARY, collapse_blanks=False)
        for text in [*TEXTS, "A BOOK", "THE DOLL SLEPT"]:
            logits = _speech_like_logits(text, rng)
            assert fast(logits) == full(logits), text
            kept += len(collapse_blank_runs(log_softmax(logits), 0))
            total += len(logits)
    assert kept < 0.8 * total  # the collapse dropped frames
    logits = _speech_like_logits("A BOOK", rng)
    only = blank_only_frames(log_softmax(logits), 0)
    assert "OO" in full(logits) and "OO" in full(logits[~(only & np.r_[False, only[:-1]])])
    assert "OO" not in full(logits[~only])  # dropping every blank-only frame merges the doubled letter

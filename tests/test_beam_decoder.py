"""The flashlight-text beam's word scores: alpha and beta mean what they meant with pyctcdecode (KenLM's log10
turned into natural log, weighted by alpha, beta per word), out-of-vocabulary words and prefixes are penalised,
and, where pyctcdecode and the kenlm module are installed, its language model gives the same word scores."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from workbench.errors import WorkbenchError
from workbench.evaluate.decoders import beam_alphabet
from workbench.evaluate.ngram import BOS, EOS, build_arpa
from workbench.evaluate.word_scorer import (
    UNK_LOGP_OFFSET,
    WordScoring,
    arpa_unigrams,
    check_hotwords,
    lm_unigrams,
    make_word_scorer,
)
from workbench.model.vocab import DEFAULT_VOCABULARY, VOCAB
from workbench.optional import has_module

pytestmark = pytest.mark.skipif(
    not has_module("flashlight.lib.text.decoder.kenlm"), reason="flashlight-text is not installed (setup.sh)"
)
TEXTS = ["THE CAT SAT ON THE MAT", "THE DOG SAT ON THE LOG", "THE CAT ATE", "A CAT AND A DOG"]


def _scores(lm: Path, text: str, alpha: float, beta: float, hotwords: tuple[str, ...] = ()) -> list[float]:
    """Every step's score as the beam would ask for it, writing ``text`` token by token, then the end."""
    labels, _ = beam_alphabet(DEFAULT_VOCABULARY)
    delimiter = labels.index(" ")
    scorer = make_word_scorer(labels, delimiter, WordScoring(lm, alpha, beta, hotwords, 10.0))
    state, steps = scorer.start(False), []
    for ch in text:
        state, step = scorer.score(state, VOCAB["|"] if ch == " " else VOCAB[ch])
        steps.append(step)
    steps.append(scorer.finish(state)[1])
    return steps


@pytest.fixture(scope="module")
def arpa(tmp_path_factory: pytest.TempPathFactory):
    path = tmp_path_factory.mktemp("lm") / "lm.arpa"
    return path, build_arpa(TEXTS * 2, path, 3)


def test_alpha_and_beta_weigh_natural_log_probabilities_per_word(arpa) -> None:
    """'THE CAT ATE': every trigram is listed in the ARPA file, so the expected total is read off the estimate."""
    path, model = arpa
    grams = [(BOS, "THE"), (BOS, "THE", "CAT"), ("THE", "CAT", "ATE"), ("CAT", "ATE", EOS)]
    log10 = sum(model.logprob[len(g) - 1][g] for g in grams)
    for alpha, beta in ((0.5, 1.0), (1.7, -0.3), (0.0, 2.0)):
        steps = _scores(path, "THE CAT ATE", alpha, beta)
        assert sum(steps) == pytest.approx(alpha * math.log(10) * log10 + 3 * beta, abs=1e-4)
        assert steps[:2] == [0.0, 0.0]  # prefixes of known words cost nothing


def test_unknown_words_and_prefixes_are_penalised(arpa) -> None:
    path, _ = arpa
    known = sum(_scores(path, "THE CAT", 1.0, 0.0))
    unknown = _scores(path, "THE CXT", 1.0, 0.0)
    assert unknown[5] == pytest.approx(UNK_LOGP_OFFSET)  # 'CX' starts no word of the model
    assert sum(unknown) < known + math.log(10) * UNK_LOGP_OFFSET / 2
    long_prefix = _scores(path, "ZZZZZZZZZ", 0.5, 0.0)
    assert long_prefix[8] - long_prefix[7] < 0  # past six characters the penalty grows with the length


def test_a_hotword_adds_its_weight_and_leads_its_prefixes(arpa) -> None:
    path, _ = arpa
    plain = _scores(path, "THE DOG", 0.5, 1.0)
    hot = _scores(path, "THE DOG", 0.5, 1.0, hotwords=("DOG",))
    assert sum(hot) == pytest.approx(sum(plain) + 10.0, abs=1e-4)
    assert hot[4] == pytest.approx(10.0 / 3)  # 'D' is a third of DOG
    with pytest.raises(WorkbenchError, match="is a phrase"):
        check_hotwords(["BIG DOG"])


def test_the_vocabulary_is_read_from_the_arpa_file(arpa, tmp_path) -> None:
    path, _ = arpa
    words = set(arpa_unigrams(path))
    assert {w for t in TEXTS for w in t.split()} <= words and lm_unigrams(path) == arpa_unigrams(path)
    fake = tmp_path / "lm.binary"
    fake.write_bytes(b"mmap lm http://kheafield.com/code format version 5\n\0" + b"\1\2\3")
    with pytest.raises(WorkbenchError, match="does not carry its vocabulary"):
        lm_unigrams(fake)


@pytest.mark.skipif(
    not (has_module("pyctcdecode") and has_module("kenlm")),
    reason="pyctcdecode and kenlm are not installed (the decoder the beam replaced; only this comparison needs them)",
)
def test_word_scores_equal_pyctcdecodes(arpa) -> None:
    """pyctcdecode's own LanguageModel scores the same words with the same alpha and beta."""
    import kenlm
    from pyctcdecode.language_model import LanguageModel

    from workbench.quiet import native_output_silenced

    path, _ = arpa
    with native_output_silenced():
        model = LanguageModel(kenlm.Model(str(path)), unigrams=arpa_unigrams(path), alpha=0.8, beta=1.3)
    state, total = model.get_start_state(), 0.0
    words = ["THE", "CAT", "ZEBRA", "ATE"]
    for i, word in enumerate(words):
        score, state = model.score(state, word, is_last_word=i == len(words) - 1)
        total += score
    assert sum(_scores(path, " ".join(words), 0.8, 1.3)) == pytest.approx(total, abs=1e-3)

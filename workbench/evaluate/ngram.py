"""A word n-gram language model (interpolated Kneser-Ney) estimated from sentences and written as ARPA text.

Why here and not a library: KenLM's estimator (``lmplz``) is a C++ program with Boost that the ``kenlm``
Python module does not include, and no maintained Python package both estimates an n-gram model and
writes ARPA (NLTK's ``nltk.lm`` estimates but cannot write one; ``arpa`` only reads). The file this module
writes is read by KenLM (inside flashlight-text), which the beam search uses (``workbench.evaluate.
decoders``); the tests check the probabilities KenLM reads back sum to one in every context.

The estimate is the one ``lmplz`` makes, with one discount per order instead of three:

- sentences are padded ``<s> w1 .. wk </s>``; counts are raw for the highest order and for n-grams that
  start with ``<s>``, else continuation counts (how many distinct words precede the n-gram);
- per order, the discount is ``D = n1 / (n1 + 2 n2)`` from the counts of counts (0.5 if undefined);
- ``p(w | h) = max(a(h w) - D, 0) / a(h .) + gamma(h) p(w | h')`` with ``gamma(h) = D * types(h .) / a(h .)``
  and unigrams interpolated with the uniform distribution over the vocabulary (``<unk>`` included);
- the ARPA file lists, for every n-gram with a count, its interpolated ``log10 p`` and, for every n-gram
  that is a context, ``log10 gamma`` as its back-off weight; so an unlisted ``h w`` scores
  ``gamma(h) p(w | h')``, the interpolated formula.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from workbench.artifacts import write_text_atomic
from workbench.errors import WorkbenchError

BOS, EOS, UNK = "<s>", "</s>", "<unk>"
Gram = tuple[str, ...]


@dataclass(frozen=True)
class NgramModel:
    """Interpolated log10 probabilities and back-off weights per order (order 1 first)."""

    order: int
    logprob: list[dict[Gram, float]]
    backoff: list[dict[Gram, float]]
    sentences: int
    words: int

    def arpa(self) -> str:
        """The ARPA text: each order's n-grams sorted, log10 p, the words and (below the top order) log10 gamma."""
        lines = ["", "\\data\\"]
        lines += [f"ngram {n + 1}={len(self.logprob[n])}" for n in range(self.order)]
        for n in range(self.order):
            lines += ["", f"\\{n + 1}-grams:"]
            logprob, backoff = self.logprob[n], self.backoff[n] if n + 1 < self.order else {}
            lines += [
                f"{logprob[gram]:.6f}\t{' '.join(gram)}\t{backoff[gram]:.6f}"
                if gram in backoff
                else f"{logprob[gram]:.6f}\t{' '.join(gram)}"
                for gram in sorted(logprob)
            ]
        lines += ["", "\\end\\", ""]
        return "\n".join(lines)

    def write(self, path: Path) -> Path:
        write_text_atomic(Path(path), self.arpa())
        return Path(path)


def _discount(counts: Iterable[int]) -> float:
    of = Counter(c for c in counts if c in (1, 2))
    n1, n2 = of[1], of[2]
    if n1 == 0 or n1 + 2 * n2 == 0:
        return 0.5
    return min(max(n1 / (n1 + 2 * n2), 0.05), 0.95)


def estimate(sentences: Iterable[str], order: int = 3) -> NgramModel:
    """Interpolated Kneser-Ney of ``order`` over space-separated words (sentences already normalised)."""
    if order < 1:
        raise WorkbenchError(f"an n-gram model needs order 1 or more, not {order}")
    raw: list[Counter[Gram]] = [Counter() for _ in range(order)]
    n_sentences = n_words = 0
    for sentence in sentences:
        words = sentence.split()
        if not words:
            continue
        n_sentences += 1
        n_words += len(words)
        tokens = [BOS, *words, EOS]
        for n in range(1, order + 1):  # the n-grams of the sentence: n shifted views zipped (counted in C)
            raw[n - 1].update(zip(*(tokens[k:] for k in range(n))))
    if n_sentences == 0:
        raise WorkbenchError("no text to estimate a language model from")
    # adjusted counts: raw at the top order and after <s>, else the number of distinct left extensions
    adjusted: list[dict[Gram, int]] = [dict() for _ in range(order)]
    adjusted[order - 1] = dict(raw[order - 1])
    for n in range(order - 1, 0, -1):
        extensions: Counter[Gram] = Counter(g[1:] for g in raw[n])
        for gram, count in raw[n - 1].items():
            adjusted[n - 1][gram] = count if gram[0] == BOS else extensions.get(gram, 0)
    adjusted[0].pop((BOS,), None)
    vocabulary = sorted({g[0] for g in adjusted[0]} | {UNK})
    logprob: list[dict[Gram, float]] = [dict() for _ in range(order)]
    backoff: list[dict[Gram, float]] = [dict() for _ in range(order)]
    # unigrams: discounted continuation counts + the uniform distribution over the vocabulary
    d1 = _discount(adjusted[0].values())
    total = sum(adjusted[0].values())
    gamma0 = d1 * sum(1 for c in adjusted[0].values() if c > 0) / total
    p1: dict[Gram, float] = {
        (w,): max(adjusted[0].get((w,), 0) - d1, 0) / total + gamma0 / len(vocabulary) for w in vocabulary
    }
    probs: dict[Gram, float] = dict(p1)
    logprob[0] = {g: math.log10(p) for g, p in p1.items()}
    logprob[0][(BOS,)] = -99.0
    for n in range(2, order + 1):
        grams = {g: c for g, c in adjusted[n - 1].items() if c > 0}
        d = _discount(grams.values())
        denominator: dict[Gram, int] = defaultdict(int)
        types: dict[Gram, int] = defaultdict(int)
        for gram, count in grams.items():
            denominator[gram[:-1]] += count
            types[gram[:-1]] += 1
        gamma = {h: d * types[h] / denominator[h] for h in denominator}
        level: dict[Gram, float] = {}
        for gram, count in grams.items():
            lower = probs.get(gram[1:])
            if lower is None:  # the suffix was not listed one order down: back off further
                lower = _backed_off(gram[1:], probs, gammas=backoff)
            level[gram] = (count - d) / denominator[gram[:-1]] + gamma[gram[:-1]] * lower
        probs.update(level)
        logprob[n - 1] = {g: math.log10(p) for g, p in level.items()}
        for h, g in gamma.items():
            backoff[n - 2][h] = math.log10(g)
    for n in range(order - 1):  # every listed n-gram below the top order carries a back-off weight
        for gram in logprob[n]:
            backoff[n].setdefault(gram, 0.0)
    return NgramModel(order, logprob, backoff, n_sentences, n_words)


def _backed_off(gram: Gram, probs: dict[Gram, float], gammas: list[dict[Gram, float]]) -> float:
    """``p(w | h)`` for an unlisted ``h w``: gamma(h) p(w | h'), recursively (ARPA semantics)."""
    if gram in probs:
        return probs[gram]
    if len(gram) == 1:
        return probs[(UNK,)]
    weight = 10 ** gammas[len(gram) - 2].get(gram[:-1], 0.0)
    return weight * _backed_off(gram[1:], probs, gammas)


def build_arpa(sentences: Iterable[str], path: Path, order: int = 3) -> NgramModel:
    """Estimate and write ``path`` (atomically); returns the model."""
    model = estimate(sentences, order)
    model.write(path)
    return model


def training_text_lm(
    path: Path, exclude: Iterable[str] = (), order: int = 3, limit: int | None = None
) -> NgramModel:
    """The demo's language model: WordNet's training split (``workbench.speech.text``: texts are assigned to
    train, calib or eval by a hash of the text, so none of these is an evaluation text), minus any text in
    ``exclude`` (the evaluation set's references, checked again here); ``limit``: the first N only."""
    from workbench.speech.text import sentence_pool

    excluded = {" ".join(t.split()) for t in exclude}
    texts = [t for t in sentence_pool()["train"] if t not in excluded][:limit]
    return build_arpa(texts, path, order)


def shared_texts(texts: Iterable[str], limit: int | None = None) -> set[str]:
    """Which of ``texts`` the training-text language model without exclusions (``training_text_lm`` with
    ``limit``) is estimated from: none, for the evaluation set's references, as the text split guarantees."""
    from workbench.speech.text import sentence_pool

    wanted = {" ".join(t.split()) for t in texts}
    return wanted.intersection(sentence_pool()["train"][:limit])

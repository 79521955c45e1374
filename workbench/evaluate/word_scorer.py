"""Word-level scoring for the flashlight-text beam: an n-gram language model and hotwords over a character CTC.

flashlight-text's lexicon-free decoder asks its language model for a score at every character it appends; its
own KenLM wrapper would then score characters, not words. ``WordScorer`` is the language model it is given
instead: it collects characters into the word being written and, when the word delimiter closes the word, asks
KenLM (flashlight-text's binding, which reads ARPA text and KenLM binaries) for the word in its n-gram context.
The scores are the ones the workbench's beam has always used (those of pyctcdecode 0.5, the decoder the beam
ran on before), so ``alpha`` and ``beta`` mean what they meant:

- a word scores ``alpha * ln(10) * log10 p(word | context) + beta``: KenLM's base-10 log-probability turned
  into natural log (the acoustic scores are natural-log softmax), weighted by ``alpha``, plus ``beta`` per word;
- a word outside the model's unigrams gets ``UNK_LOGP_OFFSET`` (log10) added to its log-probability;
- while a word is being written, its prefix scores ``UNK_LOGP_OFFSET`` when no unigram starts with it (scaled
  by its length over ``AVG_WORD_CHARS`` past that length), else 0; a prefix of a hotword scores
  ``hotword_weight * len(prefix) / len(shortest hotword it starts)`` instead;
- a completed hotword adds ``hotword_weight``; the end of the utterance scores the last word and ``</s>``.

The decoder adds the score of each step; each step's score is the change of the hypothesis's total, so the
total at every point is the sum of its words' scores plus its current prefix's, as before. States are one
node per written character (``LMState.child``), so two hypotheses merge only when their texts are equal.
Hotwords are single words: a hotword phrase (with a space) is refused, as the beam matches words one by one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError

LN10 = math.log(10.0)
UNK_LOGP_OFFSET = -10.0  # log10 added for a word (or a prefix) outside the language model's unigrams
AVG_WORD_CHARS = 6  # a prefix outside the unigrams longer than this is penalised in proportion to its length


def arpa_unigrams(path: Path) -> list[str]:
    """The words of an ARPA file's ``\\1-grams:`` section (``<s>``, ``</s>``, ``<unk>`` included)."""
    words: list[str] = []
    inside = False
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if line == "\\1-grams:":
                inside = True
            elif inside and (line.startswith("\\") or (not line and words)):
                break
            elif inside and line:
                parts = line.split()
                if len(parts) >= 2:
                    words.append(parts[1])
    return words


KENLM_BINARY_MAGIC = b"mmap lm "


def binary_unigrams(path: Path) -> list[str]:
    """The words a KenLM binary stores after its tables (``build_binary`` writes them by default): the
    NUL-separated strings from ``<unk>`` to the end of the file."""
    data = Path(path).read_bytes()
    start = data.rfind(b"<unk>\x00")
    if start < 0:
        raise WorkbenchError(
            f"the KenLM binary {path} does not carry its vocabulary (no '<unk>' word list at its end); "
            "pass its ARPA file instead, or rebuild the binary with build_binary's default settings"
        )
    return [w.decode("utf-8", errors="replace") for w in data[start:].split(b"\x00") if w]


def lm_unigrams(path: Path) -> list[str]:
    """The vocabulary of a language model file: an ARPA file's unigrams, or a KenLM binary's stored words."""
    with open(path, "rb") as handle:
        head = handle.read(len(KENLM_BINARY_MAGIC))
    return binary_unigrams(path) if head == KENLM_BINARY_MAGIC else arpa_unigrams(path)


def check_hotwords(hotwords: Iterable[str]) -> tuple[str, ...]:
    """The hotwords, stripped; a phrase (a hotword with a space) is refused with the reason."""
    words = tuple(w.strip() for w in hotwords if w.strip())
    phrases = [w for w in words if len(w.split()) > 1]
    if phrases:
        raise WorkbenchError(
            f"hotword {phrases[0]!r} is a phrase: the beam (flashlight-text) favours single words; "
            "pass each word as its own --hotword"
        )
    return words


@dataclass(frozen=True)
class WordScoring:
    """What ``WordScorer`` scores with: the language model (None: hotwords only) and the weights."""

    lm: Path | None
    alpha: float
    beta: float
    hotwords: tuple[str, ...] = ()
    hotword_weight: float = 0.0


def make_word_scorer(labels: list[str], delimiter: int, scoring: WordScoring) -> Any:
    """A flashlight-text ``LM`` scoring the words the beam writes (``labels``: what each token id writes)."""
    from flashlight.lib.text.decoder import LM, LMState

    kenlm: Any = None
    word_ids: dict[str, int] = {}
    unigrams: frozenset[str] = frozenset()
    if scoring.lm is not None:
        from flashlight.lib.text.decoder.kenlm import KenLM
        from flashlight.lib.text.dictionary import Dictionary

        from workbench.quiet import native_output_silenced

        words = lm_unigrams(Path(scoring.lm))
        unigrams = frozenset(words) - {"<s>", "</s>", "<unk>"}
        vocab = ["<unk>", *sorted(unigrams)]
        word_ids = {w: i for i, w in enumerate(vocab)}
        try:
            with native_output_silenced():  # KenLM's "Reading ..." and its progress bar of stars
                kenlm = KenLM(str(scoring.lm), Dictionary(vocab))
        except Exception as exc:  # the binding raises RuntimeError or its own types for a file it cannot read
            raise WorkbenchError(f"KenLM cannot read the language model {scoring.lm}: {exc}") from exc
    hot = frozenset(scoring.hotwords)
    prefixes: set[str] = {w[:k] for w in unigrams for k in range(1, len(w) + 1)}
    shortest_hot: dict[str, int] = {}
    for word in hot:
        for k in range(1, len(word) + 1):
            shortest_hot[word[:k]] = min(shortest_hot.get(word[:k], len(word)), len(word))
    weight = scoring.alpha * LN10

    def prefix_score(prefix: str) -> float:
        if not prefix:
            return 0.0
        if prefix in shortest_hot:
            return scoring.hotword_weight * len(prefix) / shortest_hot[prefix]
        if kenlm is None or prefix in prefixes:
            return 0.0
        scale = len(prefix) / AVG_WORD_CHARS if len(prefix) > AVG_WORD_CHARS else 1.0
        return UNK_LOGP_OFFSET * scale

    class WordScorer(LM):
        """Per state: (KenLM state of the words so far, the word being written, that prefix's score)."""

        def __init__(self) -> None:
            LM.__init__(self)
            self.states: dict[Any, tuple[Any, str, float]] = {}
            self.steps: dict[Any, float] = {}

        def start(self, start_with_nothing: bool) -> Any:
            root = LMState()
            self.states = {root: (kenlm.start(False) if kenlm is not None else None, "", 0.0)}
            self.steps = {}
            return root

        def _word(self, context: Any, word: str) -> tuple[Any, float]:
            score, out = scoring.beta + (scoring.hotword_weight if word in hot else 0.0), context
            if kenlm is not None:
                out, logp = kenlm.score(context, word_ids.get(word, 0))
                score += weight * (logp + (0.0 if word in unigrams else UNK_LOGP_OFFSET))
            return out, score

        def score(self, state: Any, token: int) -> tuple[Any, float]:
            child = state.child(token)
            if child in self.states:
                return child, self.steps[child]
            context, prefix, prefix_was = self.states[state]
            if token == delimiter:
                if prefix:
                    context, step = self._word(context, prefix)
                    step -= prefix_was
                else:
                    step = 0.0
                self.states[child] = (context, "", 0.0)
            else:
                grown = prefix + labels[token]
                now = prefix_score(grown)
                self.states[child] = (context, grown, now)
                step = now - prefix_was
            self.steps[child] = step
            return child, step

        def finish(self, state: Any) -> tuple[Any, float]:
            context, prefix, prefix_was = self.states[state]
            step = -prefix_was
            if prefix:
                context, word = self._word(context, prefix)
                step += word
            if kenlm is not None:
                context, end = kenlm.finish(context)
                step += weight * end
            return state, step

    return WordScorer()

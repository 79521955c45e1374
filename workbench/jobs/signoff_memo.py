"""What one process may reuse between sign-offs: a candidate's overflow check and its transcripts, keyed by the
content of everything that decides them.

The demo signs off twice in one process (for TensorRT and for ONNX Runtime CPU); the FP32 baseline is the same
file judged on the same sets both times, so its overflow check and its transcription (with the batch-1 check)
are made once. A key holds the candidate file's SHA-256, the set's content hash, the utterances, the model, the
backend and the settings; a changed file, set or setting misses. Transcripts made with more decoders serve a
later request for fewer (the greedy verdict decoder alone, say). The sign-off record names every reuse
(``SignoffMemo.reused``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workbench.artifacts import sha256_file

if TYPE_CHECKING:
    from workbench.evaluate.inference import DecoderSettings
    from workbench.evaluate.transcribe import BatchCheck, Transcripts
    from workbench.quantize.overflow import OverflowReport

Key = tuple[Any, ...]


def _settings(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _decoded(decoder: DecoderSettings, also_on: list[int] | None) -> str:
    """A decoder's settings and the utterances it decoded (None: all)."""
    return _settings({"decoder": decoder.to_json(), "on": also_on})


@dataclass
class SignoffMemo:
    """Overflow reports and transcripts by content key; ``reused``: one line per reuse, for the record."""

    overflow: dict[Key, OverflowReport] = field(default_factory=dict)
    transcripts: dict[Key, tuple[Transcripts, BatchCheck | None, dict[str, str]]] = field(
        default_factory=dict
    )
    reused: list[str] = field(default_factory=list)
    _digests: dict[Path, tuple[float, int, str]] = field(default_factory=dict, repr=False)

    def digest(self, path: Path) -> str:
        """The file's SHA-256 (read once per size and modification time)."""
        path = Path(path).resolve()
        stat = path.stat()
        known = self._digests.get(path)
        if known is None or known[:2] != (stat.st_mtime, stat.st_size):
            known = (stat.st_mtime, stat.st_size, sha256_file(path))
            self._digests[path] = known
        return known[2]

    def overflow_key(
        self, path: Path, set_hash: str, model_hash: str, every_tensor_clips: int, clips: int | None = None
    ) -> Key:
        """``clips``: the calibration clips whose outputs are checked (None: all)."""
        return ("overflow", self.digest(path), set_hash, model_hash, every_tensor_clips, clips)

    def transcripts_key(
        self, path: Path, set_hash: str, ids: list[str], model_hash: str, runs: dict[str, Any]
    ) -> Key:
        """``runs``: the backend, threads, batch size, sample size and inference configuration of the pass."""
        return ("transcripts", self.digest(path), set_hash, tuple(ids), model_hash, _settings(runs))

    def find_transcripts(
        self, key: Key, also: list[DecoderSettings], name: str, also_on: list[int] | None = None
    ) -> tuple[Transcripts, BatchCheck | None] | None:
        """Stored transcripts for ``key`` that hold every decoder in ``also`` (same settings, decoded on the same
        utterances ``also_on``), cut down to those."""
        stored = self.transcripts.get(key)
        if stored is None:
            return None
        result, check, decoders = stored
        wanted = {d.name: _decoded(d, also_on) for d in also}
        if any(decoders.get(n) != s for n, s in wanted.items()):
            return None
        by_decoder = {n: t for n, t in result.by_decoder.items() if n in wanted}
        self.reused.append(f"{name}: transcripts and batch check reused from an earlier sign-off in this run")
        return replace(result, candidate=name, by_decoder=by_decoder), check

    def keep_transcripts(
        self,
        key: Key,
        result: Transcripts,
        check: BatchCheck | None,
        also: list[DecoderSettings],
        also_on: list[int] | None = None,
    ) -> None:
        self.transcripts[key] = (result, check, {d.name: _decoded(d, also_on) for d in also})

    def find_overflow(self, key: Key, name: str) -> OverflowReport | None:
        found = self.overflow.get(key)
        if found is not None:
            self.reused.append(f"{name}: overflow check reused from an earlier sign-off in this run")
        return found

"""Files written by the mixed-precision search: ``search-<method>-<calib12>-dev-<dev12>.json/.csv`` in the
analysis folder, and the found plan's name; written with ``workbench.compare.outputs``' helpers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SEARCH_FORMAT = "workbench-search/1"


def search_path(folder: Path, tag: str, dev_hash: str) -> Path:
    return folder / f"search-{tag}-dev-{dev_hash[:12]}.json"


def mixed_name(tag: str, dev_hash: str) -> str:
    return f"mixed-{tag}-dev-{dev_hash[:12]}"


def search_csv_rows(data: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    conditions = sorted(data["baseline"]["per_condition"])
    columns = [
        "step",
        "phase",
        "k",
        "name",
        "passed",
        "int8_share",
        "int8_macs_share",
        "utterances",
        "stopped",
        "fp16_groups",
        "wer",
        "wer_delta",
        "wer_delta_high",
        "mean_ms_per_utterance",
    ]
    columns += [f"wer_{c}" for c in conditions] + [f"delta_high_{c}" for c in conditions]
    columns += ["wer_delta_high_judged"]  # the overall upper end as judged (widened to the sign-off set)
    rows = []
    for cand in data["candidates"]:
        row = {k: cand[k] for k in ("step", "phase", "k", "name", "passed", "int8_share", "fp16_groups")}
        row["int8_macs_share"] = cand.get("int8_macs_share")
        row["utterances"] = cand["latency"]["utterances"]
        row["stopped"] = cand.get("evidence", {}).get("stopped")
        row["wer"] = cand["wer"]["overall"]["estimate"] * 100
        row["wer_delta"] = cand["delta"]["overall"]["estimate"] * 100
        row["wer_delta_high"] = cand["delta"]["overall"]["high"] * 100
        row["mean_ms_per_utterance"] = cand["latency"]["mean_ms_per_utterance"]
        for c in conditions:  # a candidate judged on a first block lacks no condition, but read defensively
            wer, delta = cand["wer"]["per_condition"].get(c), cand["delta"]["per_condition"].get(c)
            row[f"wer_{c}"] = None if wer is None else wer["estimate"] * 100
            row[f"delta_high_{c}"] = None if delta is None else delta["high"] * 100
        row["wer_delta_high_judged"] = cand.get("judged_delta_high", {}).get("overall")
        rows.append(row)
    return columns, rows

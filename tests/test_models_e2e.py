"""End to end per architecture, through the CLI: a look-alike of each public checkpoint (published config,
shrunk, random weights) is calibrated, compared, searched, signed off and built with TensorRT-RTX on the
CPU; a lower-case model with its blank at id 29 is decoded into its own alphabet and scored like jiwer; a
Chinese character model is scored in CER; candidates name their model in the record."""

from __future__ import annotations

import json
from pathlib import Path

import jiwer
import onnx
import pytest
from modelkit import (
    CHECKPOINTS,
    CHINESE_TEXTS,
    ENGLISH_TEXTS,
    LOWER_VOCAB,
    chinese_model,
    lower_case_model,
    unit_set,
)

from workbench.cli import main
from workbench.model.description import describe_model, description_of_onnx
from workbench.model.synthetic import save_lookalike
from workbench.optional import has_module

pytestmark = pytest.mark.slow
HAS_RTX = has_module("tensorrt_rtx_bindings")
RELAXED = {"max_wer_delta_points": 30.0, "max_condition_wer_delta_points": 60.0}
# the architecture tests run the verbs' default recipe (clipping search, bias correction) on every architecture;
# the tests of vocabularies, error units and model names calibrate with the plain method (their subject is not it)
PLAIN = ("--no-recovery",)


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory):
    from conftest import _speech_like

    root = tmp_path_factory.mktemp("sets")
    calib = unit_set(
        root / "models-calib",
        [
            "THE CAT SAT",
            "A DOG RAN HOME",
            "RED SKY AT NIGHT",
            "OPEN THE DOOR",
            "SMALL BIRDS SING",
            "COLD WATER",
        ],
        _speech_like,
    )
    english = unit_set(root / "models-eval", ENGLISH_TEXTS, _speech_like, seed=1)
    chinese = unit_set(root / "models-zh", CHINESE_TEXTS, _speech_like, seed=2)
    gates = root / "gates.json"
    gates.write_text(json.dumps(RELAXED))
    return calib, english, chinese, gates


def _run(argv: list[str], capsys) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, (argv[0], captured.err[-2000:])
    return captured.out


def _signoff(
    folder: Path, calib, evaluation, work: Path, capsys, *extra: str, engines: Path | None = None
) -> dict:
    """A sign-off with its report under ``work``; its calibration under ``engines`` (default ``work``/engines)."""
    out = work / "report"
    _run(
        [
            "signoff",
            "--model",
            str(folder),
            "--calib-set",
            str(calib.path),
            "--eval-set",
            str(evaluation.path),
            "--method",
            "max",
            "--engines",
            str(engines or work / "engines"),
            "--no-latency",
            "--resamples",
            "200",
            "--out",
            str(out),
            *extra,
        ],
        capsys,
    )
    return json.loads((out / "report.json").read_text())


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_architecture_end_to_end(name, sets, tmp_path, capsys) -> None:
    calib, evaluation, _, gates = sets
    folder = save_lookalike(tmp_path / "model", name, seed=0, head_scale=50.0)
    description = describe_model(folder)
    engines = tmp_path / "engines"
    common = [
        "--model",
        str(folder),
        "--calib-set",
        str(calib.path),
        "--method",
        "max",
        "--engines",
        str(engines),
    ]
    out = _run(
        [
            "calibrate",
            "--model",
            str(folder),
            "--set",
            str(calib.path),
            "--method",
            "max",
            "--engines",
            str(engines),
        ],
        capsys,
    )
    assert description.architecture in out and "identical transcripts" in out
    fp32 = next(engines.glob("*/model.fp32.onnx"))
    assert description_of_onnx(fp32).same_model(description)
    _run(["compare", *common, "--per-condition", "1", "--no-progress"], capsys)
    sensitivity = json.loads(next(engines.glob("*/compare/sensitivity-*.json")).read_text())
    layers = json.loads(next(engines.glob("*/compare/layers-*.json")).read_text())
    assert sensitivity["model"]["architecture"] == layers["model"]["architecture"] == description.architecture
    groups = {g["name"] for g in sensitivity["layers"]}
    assert "lm_head" in groups and "feature_extractor.conv_layers.0" in groups
    if description.model_type == "wav2vec2-conformer":
        assert "encoder.layers.0.conv_module" in groups and "encoder.layers.1.ffn2" in groups
    if description.model_type == "wavlm":
        assert "encoder.layers.0.attention.rel_pos_bias" in groups
    _run(
        [
            "search",
            *common,
            "--per-condition",
            "1",
            "--refine",
            "0",
            "--resamples",
            "200",
            "--gates",
            str(gates),
            "--no-progress",
        ],
        capsys,
    )
    search = json.loads(next(engines.glob("*/compare/search-*.json")).read_text())
    assert search["error_unit"] == "wer" and search["evaluations"] >= 1
    record = _signoff(folder, calib, evaluation, tmp_path, capsys)
    assert record["model"]["model_hash"] == description.model_hash
    assert record["model"]["architecture"] == description.architecture
    assert record["accuracy"]["unit"] == "wer"
    candidates = {
        a["role"].removeprefix("candidate "): Path(a["path"])
        for a in record["provenance"]["artifacts"]
        if a["role"].startswith("candidate ")
    }
    assert {"fp32", "fp16", "int8-max"} <= set(candidates)
    if not HAS_RTX:
        pytest.skip("tensorrt_rtx_bindings cannot be imported: pip install 'workbench[trt]' to build engines")
    from workbench.quantize.plan import quantizable_nodes

    for variant, precision in (("int8-max", "int8"), ("fp16", "fp16")):
        out = _run(
            [
                "build",
                "--flavour",
                "tensorrt-rtx",
                "--onnx",
                str(candidates[variant]),
                "--batch",
                "1,2",
                "--min-seconds",
                "1",
                "--opt-seconds",
                "2",
                "--max-seconds",
                "5",
                "--engines-dir",
                str(tmp_path / "trt"),
            ],
            capsys,
        )
        assert f"model: {description.architecture}" in out
        summary = json.loads(
            next((tmp_path / "trt").glob(f"{candidates[variant].stem}-*.layers.json")).read_text()
        )
        by_name = {layer["name"]: layer.get("precision") for layer in summary["layers"]}
        nodes = quantizable_nodes(onnx.load(str(candidates[variant])))
        assert {by_name[n] for n in nodes} == {precision}, variant


def test_lower_case_model_decodes_to_its_alphabet_and_scores_like_jiwer(sets, tmp_path, capsys) -> None:
    calib, evaluation, _, _ = sets
    folder = lower_case_model(tmp_path / "lower")
    record = _signoff(folder, calib, evaluation, tmp_path, capsys, *PLAIN)
    alphabet = set(LOWER_VOCAB) - {"[UNK]", "[PAD]", "|"} | {" "}
    utts = record["accuracy"]["candidates"]["fp32"]["utterances"]
    hyps = [u["hyp"] for u in utts]
    assert any(hyps) and all(set(h) <= alphabet for h in hyps)  # lower case, no [PAD]/[UNK]/<s>
    refs = [u["ref"] for u in utts]
    assert refs == [
        "hello world",
        "the cat's bowl is empty",
        "don't stop now",
        "a quiet morning",
        "open the window please",
        "read the book again",
    ]
    for name, cand in record["accuracy"]["candidates"].items():
        ours = cand["overall"]["wer"]["estimate"]
        assert ours == pytest.approx(jiwer.wer(refs, [u["hyp"] for u in cand["utterances"]]), abs=1e-12), name


def test_candidates_name_their_model_in_the_record(sets, tmp_path, capsys) -> None:
    calib, evaluation, _, _ = sets
    folder = lower_case_model(tmp_path / "lower")
    engines = tmp_path / "engines"
    _run(
        [
            "calibrate",
            "--model",
            str(folder),
            "--set",
            str(calib.path),
            "--method",
            "max",
            *PLAIN,
            "--engines",
            str(engines),
        ],
        capsys,
    )
    fp32, int8 = next(engines.glob("*/model.fp32.onnx")), next(engines.glob("*/model.int8-max-*.onnx"))
    out = tmp_path / "report"
    _run(
        [
            "signoff",
            "--candidate",
            f"fp32={fp32}",
            "--candidate",
            f"int8={int8}",
            "--eval-set",
            str(evaluation.path),
            "--no-latency",
            "--resamples",
            "200",
            "--out",
            str(out),
        ],
        capsys,
    )
    record = json.loads((out / "report.json").read_text())
    assert record["model"]["model_hash"] == describe_model(folder).model_hash  # not the demo model's
    assert record["model"]["blank_id"] == 29
    # a baseline that names no model needs --model; candidates of two models are refused
    bare = onnx.load(str(fp32))
    del bare.metadata_props[:]
    onnx.save(bare, str(tmp_path / "bare.onnx"))
    other = save_lookalike(tmp_path / "other", "facebook/wav2vec2-base-960h", seed=1)
    _run(
        [
            "calibrate",
            "--model",
            str(other),
            "--set",
            str(calib.path),
            "--method",
            "max",
            *PLAIN,
            "--engines",
            str(tmp_path / "engines2"),
        ],
        capsys,
    )
    other_fp32 = next((tmp_path / "engines2").glob("*/model.fp32.onnx"))
    for argv, message in (
        ([f"fp32={tmp_path / 'bare.onnx'}"], "does not say which model"),
        ([f"fp32={fp32}", f"other={other_fp32}"], "different models"),
    ):
        code = main(
            [
                "signoff",
                *[a for c in argv for a in ("--candidate", c)],
                "--eval-set",
                str(evaluation.path),
                "--no-latency",
                "--out",
                str(tmp_path / "refused"),
            ]
        )
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1 and len(err) == 1 and message in err[0]
    assert not (tmp_path / "refused").exists()
    code = main(
        [
            "signoff",
            "--candidate",
            f"fp32={fp32}",
            "--model",
            str(other),
            "--eval-set",
            str(evaluation.path),
            "--no-latency",
            "--out",
            str(tmp_path / "refused"),
        ]
    )
    assert code == 1 and "is not the model the candidates were exported from" in capsys.readouterr().err


def test_character_model_is_scored_in_cer(sets, tmp_path, capsys) -> None:
    calib, _, chinese, _ = sets
    folder = chinese_model(tmp_path / "zh")
    record = _signoff(folder, calib, chinese, tmp_path, capsys, *PLAIN)
    assert record["accuracy"]["unit"] == "cer" and record["model"]["error_unit"] == "cer"
    utts = record["accuracy"]["candidates"]["fp32"]["utterances"]
    refs = [u["ref"] for u in utts]
    assert refs[0] == "我们在学习中文" and [u["N"] for u in utts] == [len(r) for r in refs]
    for name, cand in record["accuracy"]["candidates"].items():
        hyps = [u["hyp"] for u in cand["utterances"]]
        assert " " not in "".join(hyps)
        assert cand["overall"]["wer"]["estimate"] == pytest.approx(jiwer.cer(refs, hyps), abs=1e-12), name
    checks = [c["detail"] for v in record["verdicts"] for c in v["checks"] if c["name"] == "overall"]
    assert any("CER delta" in d for d in checks)
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "CER % [95% CI]" in markdown and "CER = (S + D + I) / reference characters" in markdown
    # the flag overrides the unit: the same model judged per word (its calibration above reused)
    forced = _signoff(
        folder,
        calib,
        chinese,
        tmp_path / "wer",
        capsys,
        "--error-unit",
        "wer",
        *PLAIN,
        engines=tmp_path / "engines",
    )
    assert forced["accuracy"]["unit"] == "wer" and forced["model"]["error_unit_from"] == "--error-unit"

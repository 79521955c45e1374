"""Dashboard pages under Streamlit's AppTest on artifacts made by the real code paths (tests/dashkit.py):
widgets present, no exceptions, the numbers shown equal the artifacts'; the path resolver refuses
everything outside the artifact folders (unit and through query parameters); Run page jobs (checked by the
job's own input checks, the ones the CLI verb runs, and bounded by the job limit); access: read-only mode,
the token sign-in, OIDC and a non-loopback address without access control failing closed."""

from __future__ import annotations

import importlib
import io
import json
import shutil
from pathlib import Path

import onnx
import pytest

pytest.importorskip("streamlit")
from dashkit import copy_artifacts
from streamlit.testing.v1 import AppTest

from workbench.calibration import cache as cache_mod
from workbench.dashboard import access
from workbench.dashboard import background as jobs
from workbench.dashboard.paths import ENV_VAR, ArtifactRoots, OutsideArtifacts, resolve
from workbench.quantize.plan import quantizable_nodes
from workbench.report.render import verdict_line

APP = Path(__file__).resolve().parent.parent / "app.py"


def page(name: str, **query: str) -> AppTest:
    at = AppTest.from_string(
        f"from workbench.dashboard.pages import {name}\n{name}.render()", default_timeout=60
    )
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


@pytest.fixture(autouse=True)
def access_env(monkeypatch):
    """No access setting from the caller's environment; Streamlit options a test changes are put back."""
    from streamlit import config

    for name in (
        access.TOKEN_ENV,
        access.TOKEN_FILE_ENV,
        access.AUTH_ENV,
        access.READ_ONLY_ENV,
        access.MAX_JOBS_ENV,
        access.ALLOWED_USERS_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    saved = {name: config.get_option(name) for name in ("client.disableDataExport", "server.address")}
    yield monkeypatch
    for name, value in saved.items():
        config.set_option(name, value)


@pytest.fixture
def artifacts(dash_artifacts, monkeypatch):
    monkeypatch.setenv(ENV_VAR, str(dash_artifacts.root))
    return dash_artifacts


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


# ---------------------------------------------------------------- resolver


def test_resolver_allows_only_the_artifact_folders(tmp_path) -> None:
    root = tmp_path / "art"
    for area in ("calib_sets", "engines", "reports", "models"):
        (root / area).mkdir(parents=True)
    (root / "calib_sets" / "a").mkdir()
    (root / "calib_sets" / "a" / "card.json").write_text("{}")
    secret = tmp_path / "secret.txt"
    secret.write_text("no")
    (root / "calib_sets" / "leak").symlink_to(secret)
    (root / "calib_sets" / "leakdir").symlink_to(tmp_path)
    (root / "calib_sets" / "inside").symlink_to(root / "calib_sets" / "a")
    (root / "project-file.txt").write_text("not an artifact")
    roots = ArtifactRoots(root)
    assert resolve("a/card.json", "calib_sets", roots) == (root / "calib_sets/a/card.json").resolve()
    assert resolve(root / "calib_sets/a", "calib_sets", roots).is_dir()
    assert resolve("inside/card.json", "calib_sets", roots).name == "card.json"  # symlink that stays inside
    refused = [
        "../../secret.txt",
        "a/../../project-file.txt",
        "../reports",
        str(secret),
        "/etc/passwd",
        "leak",
        "leakdir/secret.txt",
        "leakdir",
        "a/\x00x",
        "",
        "missing",
        "~/x",
    ]
    for value in refused:
        with pytest.raises(OutsideArtifacts):
            resolve(value, "calib_sets", roots)
    with pytest.raises(OutsideArtifacts):  # another area's file is refused when only calib_sets is allowed
        (root / "reports" / "r.json").write_text("{}")
        resolve(root / "reports" / "r.json", "calib_sets", roots)
    assert resolve(root / "reports" / "r.json", ("calib_sets", "reports"), roots).name == "r.json"


@pytest.mark.parametrize(
    "name,param", [("sets", "set"), ("signoff", "report"), ("tradeoff", "report"), ("calibration", "cache")]
)
def test_crafted_query_parameters_are_refused(artifacts, name, param) -> None:
    for value in ("../../../etc/passwd", "/etc/passwd", "..", "unit-calib/../../models/tiny/config.json"):
        at = page(name, **{param: value})
        assert not at.exception
        assert "passwd" not in texts(at.markdown) + texts(at.code) + texts(at.json)
        assert any("refused" in e.value or "not one of" in e.value for e in [*at.error, *at.warning]), value


def test_artifacts_symlinked_out_of_the_folders_are_not_read(tmp_path, monkeypatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text(json.dumps({"content_hash": "SECRET", "keys": {"method": "SECRET"}}))
    root = tmp_path / "art"
    evil = root / "calib_sets" / "evil"
    evil.mkdir(parents=True)
    (evil / "card.json").symlink_to(outside / "secret.json")
    (evil / "manifest.jsonl").symlink_to(outside / "secret.json")
    run = root / "engines" / "abc"
    run.mkdir(parents=True)
    (run / "calib-x-entropy.cache").write_text("TRT-10100-EntropyCalibration2\n")
    (run / "calib-x-entropy.cache.json").symlink_to(outside / "secret.json")
    monkeypatch.setenv(ENV_VAR, str(root))
    at = page("sets", set="evil")
    assert not at.exception and "refused" in texts(at.error)
    at = page("calibration")
    assert not at.exception and "refused" in texts(at.error)
    shown = texts(at.markdown) + texts(at.error) + texts(at.json) + str(at.dataframe[0].value.to_dict())
    assert "SECRET" not in shown


# ---------------------------------------------------------------- pages


def test_app_navigation_opens_the_overview(artifacts) -> None:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert not at.exception
    counts = {m.label: m.value for m in at.metric}
    assert (
        counts["speech sets"] == "2"
        and counts["calibration caches"] == "1"
        and counts["sign-off reports"] == "1"
    )
    assert counts["layer comparisons"] == "1"
    assert verdict_line(artifacts.record).split(":")[0].replace("SHIP ", "") in texts(at.success) + texts(
        at.info
    ) + texts(at.error)
    assert f"Workspace: `{artifacts.root.resolve()}`" in texts(at.caption)


def test_overview_shows_the_current_directory_as_the_workspace_by_default(tmp_path, monkeypatch) -> None:
    from workbench.workspace import LEGACY_ENV_VAR

    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.delenv(LEGACY_ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    at = page("home")
    assert not at.exception
    assert f"Workspace: `{tmp_path.resolve()}`" in texts(at.caption)


def test_empty_artifact_folders_say_which_command_to_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    expected = {
        "sets": "data build",
        "calibration": "workbench calibrate",
        "layers": "workbench compare",
        "tradeoff": "workbench signoff",
        "signoff": "workbench demo",
        "run": "data build",
        "home": "workbench demo",
    }
    for name, command in expected.items():
        at = page(name)
        assert not at.exception, name
        assert command in texts(at.info), name


def test_a_damaged_record_is_shown_as_an_error_on_the_pages_that_open_it(
    artifacts, tmp_path, monkeypatch
) -> None:
    root = tmp_path / "art"
    shutil.copytree(artifacts.root / "reports", root / "reports", ignore=shutil.ignore_patterns("_jobs"))
    record = next((root / "reports").glob("*/report.json"))
    record.write_text(
        record.read_text().replace('"candidates"', '"candidatez"', 1)
    )  # digest no longer matches
    monkeypatch.setenv(ENV_VAR, str(root))
    for name in ("signoff", "tradeoff"):
        at = page(name)
        assert not at.exception, name
        assert [e.value for e in at.error] == [
            at.error[0].value
        ] and "was edited after it was written" in at.error[0].value, name
        assert not at.dataframe, name  # the page stops at the error


def test_pareto_column_marks_the_front_and_leaves_untimed_rows_off() -> None:
    import pandas as pd

    from workbench.dashboard.data.reports import on_pareto_front

    frame = pd.DataFrame(
        {
            "candidate": ["fp32", "fp16", "int8", "slow-and-worse", "untimed"],
            "latency ms": [10.0, 6.0, 4.0, 8.0, None],
            "WER %": [10.0, 10.5, 12.0, 11.0, 1.0],
        }
    )
    assert list(on_pareto_front(frame)) == [True, True, True, False, False]


def test_sets_page_matches_the_card(artifacts) -> None:
    card = artifacts.calib.card
    at = page("sets", set="unit-calib")
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["utterances"] == str(card["utterances"]) and metrics["speakers"] == str(card["speakers"])
    assert metrics["accents"] == str(len(card["accents"]))
    assert metrics["SNR range"] == f"{card['snr_db']['min']:.0f} to {card['snr_db']['max']:.0f} dB"
    assert at.selectbox(key="pick-set").options == ["unit-calib", "unit-eval"]
    assert len(at.get("audio")) == 1
    assert "6 of 6 utterances" in texts(at.caption)
    at.multiselect(key="f-condition").select("noisy").run()
    noisy = card["conditions"]["noisy"]
    assert f"{noisy} of 6 utterances" in texts(at.caption)
    noisy_ids = [u.id for u in artifacts.calib.utterances if u.condition == "noisy"]
    assert [o.split(" · ")[0] for o in at.selectbox(key="listen").options] == noisy_ids
    at.text_input(key="f-text").input("nothing like this").run()
    assert "No utterance matches" in texts(at.info)
    other = page("sets", set="unit-eval")
    assert {m.label: m.value for m in other.metric}["utterances"] == str(artifacts.eval.card["utterances"])


def test_calibration_page_matches_cache_and_histograms(artifacts) -> None:
    cache = cache_mod.load(artifacts.calibrated.cache)
    at = page("calibration")
    assert not at.exception
    assert "reusable" in texts(at.success)
    tensor = at.selectbox(key="tensor").value
    metrics = {m.label: m.value for m in at.metric}
    cached = f"{cache.amax()[tensor]:.4g}"
    assert metrics["cached amax"] == cached
    # entropy recomputed from the histogram sidecar gives the cache's own threshold
    assert metrics["entropy (cache)"] == cached
    assert float(metrics["max"]) >= float(metrics["percentile"]) > 0
    assert len(at.selectbox(key="tensor").options) == len(cache.scales)
    other = next(t for t in at.selectbox(key="tensor").options if t != tensor)
    at.selectbox(key="tensor").select(other).run()
    assert {m.label: m.value for m in at.metric}["entropy (cache)"] == f"{cache.amax()[other]:.4g}"


def test_calibration_page_shows_convergence_and_older_sidecars(artifacts, tmp_path, monkeypatch) -> None:
    from workbench.calibration import convergence

    found, _ = convergence.from_sidecar(cache_mod.load(artifacts.calibrated.cache).convergence)
    assert found is not None
    at = page("calibration")
    assert not at.exception
    assert found.verdict() in texts(at.success if found.converged else at.warning)
    frame = next(d.value for d in at.dataframe if "change %" in d.value.columns)
    assert set(frame["tensor"]) == {c.tensor for c in found.changes}
    assert frame["change %"].abs().max() == pytest.approx(found.max_change * 100, abs=1e-3)
    # a sidecar written before convergence was recorded: "not recorded", the rest of the page as before
    root = tmp_path / "art"
    shutil.copytree(artifacts.root / "engines", root / "engines")
    (root / "calib_sets").mkdir()
    sidecar = cache_mod.sidecar(next((root / "engines").glob("*/*.cache")))
    meta = json.loads(sidecar.read_text())
    del meta["convergence"]
    sidecar.write_text(json.dumps(meta))
    monkeypatch.setenv(ENV_VAR, str(root))
    old = page("calibration")
    assert not old.exception
    assert "Convergence not recorded" in texts(old.info)
    assert old.selectbox(key="tensor").options


def test_calibration_page_says_when_histograms_belong_to_another_run(
    artifacts, tmp_path, monkeypatch
) -> None:
    root = tmp_path / "art"
    shutil.copytree(artifacts.root / "engines", root / "engines")
    (root / "calib_sets").mkdir()
    cache = next((root / "engines").glob("*/*.cache"))
    other = cache_mod.load(cache)
    other.scales = {k: v * 2 for k, v in other.scales.items()}  # a recalibration without a new histogram file
    other.save(cache)
    monkeypatch.setenv(ENV_VAR, str(root))
    at = page("calibration")
    assert not at.exception
    assert "comes from another calibration run" in texts(at.info)
    assert "its calibration set is not under calib_sets/" in texts(at.success)


def test_tradeoff_page_matches_the_record(artifacts) -> None:
    record = artifacts.record
    at = page("tradeoff")
    assert not at.exception
    assert "Deployment target: **ort-cpu**; measured on ort-cpu" in texts(at.markdown)
    frame = at.dataframe[0].value
    assert list(frame["candidate"]) == record["candidates"]
    for _, row in frame.iterrows():
        wer = record["accuracy"]["candidates"][row["candidate"]]["overall"]["wer"]
        assert row["WER %"] == pytest.approx(wer["estimate"] * 100)
        verdict = next(v for v in record["verdicts"] if v["candidate"] == row["candidate"])
        assert row["verdict"] == ("PASS" if verdict["passed"] else "FAIL")
    assert record["recommendation"]  # the fixture's gates pass at least one candidate
    assert f"Verdict: **{verdict_line(record)}**" in texts(at.markdown)
    fp32 = onnx.load(str(artifacts.calibrated.fp32_onnx))
    compute = len(quantizable_nodes(fp32))
    every = sum(
        n.op_type != "Cast" for n in fp32.graph.node
    )  # the plan covers every node (Casts are not planned)
    labels = ("int8 nodes", "fp16 nodes", "fp32 nodes", "no float data")
    for candidate in ("fp32", "fp16", "int8-entropy"):
        at.selectbox(key="pick-candidate").select(candidate).run()
        assert not at.exception
        metrics = {m.label: int(m.value) for m in at.metric if m.label in labels}
        assert sum(metrics.values()) == every, candidate
        if candidate == "fp32":
            assert metrics["int8 nodes"] == metrics["fp16 nodes"] == 0 and metrics["fp32 nodes"] > compute
        if candidate == "fp16":  # the whole graph in FP16 but the guard's FP32 nodes
            assert metrics["int8 nodes"] == 0 and metrics["fp16 nodes"] > metrics["fp32 nodes"] + compute
        if candidate == "int8-entropy":
            assert metrics["int8 nodes"] == compute and metrics["fp16 nodes"] > metrics["fp32 nodes"]
    gate_axis = next(o for o in at.radio(key="axis").options if "latency gate" in o)
    at.radio(key="axis").set_value(gate_axis).run()  # the axis the latency gate judges, with its limit drawn
    assert not at.exception
    worst = at.dataframe[0].value.set_index("candidate")["p90 worst ms"]
    for name in record["candidates"]:
        want = max(p["p90_ms"] for p in record["latency"][name]["points"] if p["batch"] == 1)
        assert worst[name] == pytest.approx(want)
    condition = sorted(record["accuracy"]["candidates"]["fp32"]["groups"]["condition"])[0]
    at.selectbox(key="group").select(condition).run()
    got = at.dataframe[0].value.set_index("candidate")["WER %"]
    for name in record["candidates"]:
        want = (
            record["accuracy"]["candidates"][name]["groups"]["condition"][condition]["wer"]["estimate"] * 100
        )
        assert got[name] == pytest.approx(want)


def test_tradeoff_plot_shows_the_delta_against_the_baseline_with_its_interval(artifacts) -> None:
    """The plot's vertical axis is the paired delta against the baseline (points) with its interval, not the
    absolute error rate from 0: the baseline sits at 0 and the gate's rule at the allowed delta."""
    from workbench.dashboard import charts
    from workbench.dashboard.data.reports import gate_lines, tradeoff_frame

    record = artifacts.record
    frame = tradeoff_frame(record)
    spec = charts.tradeoff_chart(frame, gate_lines(record), "latency ms", "ms", "delta", "WER").to_dict()
    fields = {str(layer.get("encoding", {}).get("y", {}).get("field")) for layer in spec["layer"]}
    assert {"delta low pts", "delta pts"} <= fields and "WER %" not in fields
    rows = frame.set_index("candidate")
    for name in record["candidates"]:
        delta = record["accuracy"]["candidates"][name]["overall"].get("delta")
        want = (0.0, 0.0) if delta is None else (delta["low"] * 100, delta["estimate"] * 100)
        assert (rows.loc[name, "delta low pts"], rows.loc[name, "delta pts"]) == pytest.approx(want)
    rules = [layer for layer in spec["layer"] if layer.get("mark", {}).get("color") == "#c62828"]
    gate = record["gates"]["max_wer_delta_points"]
    assert len(rules) == 1 and any(d[0]["y"] == gate for d in spec["datasets"].values() if "label" in d[0])


def test_tradeoff_page_marks_the_anchor_points_of_an_anchors_record(artifacts, tmp_path, monkeypatch) -> None:
    from workbench.dashboard.data.anchors import ANCHORS_NAME, anchors_sidecar

    root = copy_artifacts(artifacts.root, tmp_path / "art")
    tools = {"fp32": "baseline", "fp16": "ModelOpt", "int8-entropy": "ONNX Runtime"}
    sidecar = root / "reports" / "unit-signoff" / ANCHORS_NAME
    sidecar.write_text(json.dumps(anchors_sidecar(tools, {}, "test")))
    monkeypatch.setenv(ENV_VAR, str(root))
    at = page("tradeoff")
    assert not at.exception
    frame = at.dataframe[0].value
    assert dict(zip(frame["candidate"], frame["made by"])) == tools
    assert "ModelOpt, ONNX Runtime are marked" in texts(at.caption)
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    shapes = [layer["encoding"]["shape"] for layer in spec["layer"] if "shape" in layer.get("encoding", {})]
    assert shapes and shapes[0]["field"] == "made by"  # the same chart, the tool drawn as the marker's shape
    sidecar.write_text(
        '{"format": "workbench-anchors", "version": 1, "tools": ["fp16"]}'
    )  # damaged: warned, no marks
    at = page("tradeoff")
    assert not at.exception and "made by" not in at.dataframe[0].value.columns
    assert "Anchor points not marked" in texts(at.warning)


def test_signoff_page_verdict_downloads_and_input_check(artifacts) -> None:
    at = page("signoff")
    assert not at.exception
    shown = texts(at.success) + texts(at.info) + texts(at.error)
    assert verdict_line(artifacts.record) in shown
    assert "every input artifact still has the hash" in texts(at.caption)
    labels = [b.proto.label for b in at.get("download_button")]
    assert {"report.json", "report.html", "report.md"} <= set(labels)
    assert any(label.startswith("calibration cache:") for label in labels)
    assert any(label.startswith("candidate int8-entropy:") for label in labels)
    assert len(at.get("iframe")) == 1


def test_signoff_page_flags_changed_inputs_and_does_not_serve_outside_files(
    artifacts, tmp_path, monkeypatch
) -> None:
    outside = tmp_path / "outside.onnx"
    outside.write_bytes(b"x")

    def move_fp16_out(entry: dict) -> None:
        if entry["role"] == "candidate fp16":
            entry["path"] = str(outside)

    root = copy_artifacts(artifacts.root, tmp_path / "art", move_fp16_out)
    (root / "calib_sets" / "unit-eval" / "card.md").write_text("edited")
    monkeypatch.setenv(ENV_VAR, str(root))
    at = page("signoff")
    assert not at.exception
    warning = texts(at.warning)
    assert "evaluation set" in warning and "changed" in warning and "candidate fp16" in warning
    labels = [b.proto.label for b in at.get("download_button")]
    assert not any(label.startswith("candidate fp16") for label in labels)
    assert "not offered" in texts(at.caption)


@pytest.mark.trt
def test_signoff_page_offers_engines_built_from_a_candidate(artifacts, tmp_path, monkeypatch) -> None:
    from workbench.backends.tensorrt.builder import BuildSettings, build_engine
    from workbench.backends.tensorrt.profile import Range
    from workbench.errors import WorkbenchError

    root = copy_artifacts(artifacts.root, tmp_path / "art")
    int8 = next((root / "engines").glob("*/model.int8-*.onnx"))
    try:
        built = build_engine(
            int8,
            BuildSettings(batches=(1,), samples=Range(16_000, 32_000, 80_000)),
            engines_dir=root / "engines" / "trt",
        )
    except WorkbenchError as exc:
        pytest.skip(f"no TensorRT builder here: {exc}")
    monkeypatch.setenv(ENV_VAR, str(root))
    at = page("signoff")
    assert not at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert f"TensorRT engine: {built.engine_path.name}" in labels
    assert sum(label.startswith("TensorRT engine") for label in labels) == 1  # only the candidate's engine


def _compare_json(root: Path, pattern: str) -> dict:
    return json.loads(next((root / "engines").glob(f"*/compare/{pattern}")).read_text())


def test_layers_page_matches_the_compare_outputs(artifacts) -> None:
    layers = _compare_json(artifacts.root, "layers-*.json")
    sens = _compare_json(artifacts.root, "sensitivity-*.json")
    at = page("layers")
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["tensors compared"] == str(layers["summary"]["tensors"])
    assert metrics["significant"] == str(layers["summary"]["significant"])
    rows = {r["node"]: r for r in layers["rows"]}
    compute = [r["node"] for r in layers["rows"] if r["compute"]]
    assert at.selectbox(key="layer-node").options == compute
    first = layers["first_significant"]
    assert first and first["node"] in compute  # INT8 everywhere: the error starts at a compute node
    assert at.selectbox(key="layer-node").value == first["node"]
    assert first["node"] in texts(at.warning)
    kl = {g["name"]: g["kl"] for g in sens["layers"]}
    for node in (compute[0], compute[-1]):
        at.selectbox(key="layer-node").select(node).run()
        assert not at.exception
        shown = {m.label: m.value for m in at.metric}
        assert (
            shown["cosine"] == f"{rows[node]['cosine']:.5f}"
            and shown["rel L2"] == f"{rows[node]['rel_l2']:.4f}"
        )
        assert shown["sensitivity KL"] == f"{kl[rows[node]['group']]:.4g}"
        assert any(json.loads(j.value).get("op") == rows[node]["op"] for j in at.json)  # the ONNX node itself
    at.toggle(key="compute-only").set_value(False).run()
    assert len(at.selectbox(key="layer-node").options) == len(layers["rows"])


def test_tradeoff_page_shows_search_candidates(artifacts) -> None:
    search = _compare_json(artifacts.root, "search-*.json")
    fp32 = onnx.load(str(artifacts.calibrated.fp32_onnx))
    at = page("tradeoff")
    at.radio(key="source").set_value("search records").run()
    assert not at.exception
    frame = at.dataframe[0].value
    assert list(frame["candidate"]) == [search["baseline"]["name"]] + [
        c["name"] for c in search["candidates"]
    ]
    for c in search["candidates"]:
        row = frame[frame["candidate"] == c["name"]].iloc[0]
        assert row["WER %"] == pytest.approx(c["wer"]["overall"]["estimate"] * 100)
        assert row["verdict"] == ("PASS" if c["passed"] else "FAIL")
        assert row["int8 MACs share"] == pytest.approx(c["int8_macs_share"])  # beside the node share
        assert (
            row["dev utterances"] == c["latency"]["utterances"] and row["stopped"] == c["evidence"]["stopped"]
        )
    assert search["found"]  # a random model's WER drifts little: the fixture's search finds a plan
    assert search["found"]["name"] in texts(at.markdown)
    assert f"{search['found']['int8_macs_share'] * 100:.0f} % of multiply-accumulates" in texts(at.markdown)
    found = next(c for c in search["candidates"] if c["step"] == search["found"]["step"])
    assert at.selectbox(key="search-candidate").value == found["name"]  # the found plan opens first
    for c in search["candidates"]:
        at.selectbox(key="search-candidate").select(c["name"]).run()
        assert not at.exception
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["int8 nodes"] == str(c["int8_nodes"]), c["name"]
        total = sum(int(metrics[k]) for k in ("int8 nodes", "fp16 nodes", "fp32 nodes", "no float data"))
        assert total == len(fp32.graph.node)  # every node of the FP32 graph has a place in the plan


def test_pages_name_the_records_error_unit(artifacts, tmp_path, monkeypatch) -> None:
    """A record and a search counted in CER (a character model's) are shown as CER, not WER."""
    from workbench.report.record import record_digest

    root = copy_artifacts(artifacts.root, tmp_path / "art")
    record_path = root / "reports" / "unit-signoff" / "report.json"
    record = json.loads(record_path.read_text())
    record["accuracy"]["unit"] = record["model"]["error_unit"] = "cer"
    record["record_sha256"] = record_digest(record)
    record_path.write_text(json.dumps(record))
    search_path = next((root / "engines").glob("*/compare/search-*.json"))
    search = json.loads(search_path.read_text())
    search_path.write_text(json.dumps({**search, "error_unit": "cer"}))
    monkeypatch.setenv(ENV_VAR, str(root))
    at = page("tradeoff")
    assert not at.exception
    assert at.selectbox(key="group").label == "CER of"
    assert "CER %" in at.dataframe[0].value.columns and "WER %" not in at.dataframe[0].value.columns
    at.radio(key="source").set_value("search records").run()
    assert not at.exception
    assert at.selectbox(key="search-group").label == "CER of" and "CER on the dev set" in texts(at.caption)
    assert "CER %" in at.dataframe[0].value.columns
    at = page("signoff")
    assert not at.exception and "errors counted in CER" in texts(at.caption)


# ---------------------------------------------------------------- run page and jobs


def test_progress_is_parsed_from_real_tqdm_output() -> None:
    from tqdm import tqdm

    buffer = io.StringIO()
    for _ in tqdm(range(10), desc="calibration (one pass)", file=buffer, mininterval=0, miniters=1):
        if _ == 3:
            break
    prog = jobs.progress("=== [2/3] calibrate: export\n" + buffer.getvalue())
    assert prog.fraction == pytest.approx(0.3) and "calibration (one pass): 3/10" in prog.label
    assert "step 2/3 calibrate" in prog.label
    assert jobs.progress("=== [3/3] signoff: x\n").fraction == pytest.approx(2 / 3)
    assert jobs.progress("").fraction is None
    assert jobs.error_lines("x\nerror: no speech set at foo\n") == ["error: no speech set at foo"]


def test_run_page_job_inputs_survive_the_job_file_and_stay_in_the_artifact_root(artifacts, tmp_path) -> None:
    from workbench.dashboard.pages import run
    from workbench.errors import WorkbenchError
    from workbench.jobs import codec

    roots = ArtifactRoots(artifacts.root)
    model, calib, dev = str(artifacts.model), str(artifacts.calib.path), str(artifacts.eval.path)
    made = [
        run.calibrate_inputs(model, calib, "mse", 99.9, roots),
        run.analysis_inputs("compare", model, calib, "entropy", 2, "group", None, roots),
        run.analysis_inputs("search", model, calib, "entropy", 2, "node", calib, roots, dev),
        run.signoff_inputs(model, calib, dev, "entropy", "ui-report", "1,8", 10, roots),
        run.signoff_inputs(model, calib, dev, "entropy", "ui-report", None, 0, roots),
    ]
    assert [codec.job_of(i) for i in made] == ["calibrate", "compare", "search", "signoff", "signoff"]
    for number, inputs in enumerate(made):
        path = tmp_path / f"job-{number}.json"
        codec.write_job(path, inputs)
        module, back = codec.read_job(path)
        assert back == inputs and module.__name__ == f"workbench.jobs.{codec.job_of(inputs)}"
        for name in ("engines", "out_dir", "calib_root"):
            if getattr(inputs, name, None) is not None:
                assert Path(getattr(inputs, name)).resolve().is_relative_to(artifacts.root.resolve()), inputs
    assert made[3].latency.batch_sizes == (1, 8) and made[3].limit == 10 and made[4].latency is None
    assert made[2].dev_set == calib and made[2].signoff_set == dev and made[2].granularity == "node"
    for bad in ("../x", "/tmp/x", "a/b", ""):
        with pytest.raises(WorkbenchError):
            run.signoff_inputs(model, calib, dev, "entropy", bad, None, 0, roots)
    with pytest.raises(WorkbenchError, match="latency batch sizes"):
        run.signoff_inputs(model, calib, dev, "entropy", "ui-report", "1,x", 0, roots)
    (tmp_path / "not-a-job.json").write_text('{"format": "workbench-job/1", "job": "rm", "inputs": {}}')
    with pytest.raises(WorkbenchError, match="names no known job"):
        codec.read_job(tmp_path / "not-a-job.json")
    page_at = page("run")
    tabs = [t.label for t in page_at.tabs]
    assert tabs == ["Project (workbench run)", "Calibrate", "Compare layers", "Search", "Sign-off"]
    assert [b.label for b in page_at.form_submit_button] == [
        "Start calibration",
        "Start compare",
        "Start search",
        "Start sign-off",
    ]


@pytest.mark.slow
def test_run_page_starts_jobs_in_the_background(artifacts, tmp_path, monkeypatch) -> None:
    root = tmp_path / "art"
    shutil.copytree(artifacts.calib.path, root / "calib_sets" / "unit-calib")
    shutil.copytree(artifacts.model, root / "models" / "tiny")
    (root / "models" / "no-weights").mkdir()
    (root / "models" / "no-weights" / "config.json").write_text("{}")
    damaged = shutil.copytree(artifacts.model, root / "models" / "damaged-weights")
    (damaged / "model.safetensors").unlink()
    (damaged / "pytorch_model.bin").write_bytes(b"not a checkpoint")
    monkeypatch.setenv(ENV_VAR, str(root))
    roots = ArtifactRoots(root)
    at = page("run")
    assert not at.exception
    assert {"models/tiny", "models/no-weights"} <= set(at.selectbox(key="cal-model").options)
    # a crafted model path is refused before anything starts
    at.text_input(key="cal-model-path").input("../../../etc")
    at.form_submit_button[0].click().run()
    assert "refused" in texts(at.error) and not jobs.list_jobs(roots)
    # a model folder that is not a supported CTC model: the job's own check refuses it at the form, nothing starts
    at.text_input(key="cal-model-path").input("no-weights")
    at.form_submit_button[0].click().run()
    assert not at.exception
    assert "config.json names no architecture" in texts(at.error) and not jobs.list_jobs(roots)
    # damaged weights pass the checks (no weights are read before the job): the job fails, the page shows its line
    at.text_input(key="cal-model-path").input("damaged-weights")
    at.form_submit_button[0].click().run()
    assert not at.exception
    # meanwhile (not blocked), a real calibration of the tiny model started from the same form
    at.text_input(key="cal-model-path").input("")
    at.selectbox(key="cal-model").select("models/tiny")
    at.selectbox(key="cal-method").select("max")
    at.form_submit_button[0].click().run()
    assert not at.exception
    started = jobs.list_jobs(roots)
    assert [j.kind for j in started] == ["calibrate", "calibrate"]
    assert "running" in texts(at.markdown) or "finished" in texts(at.markdown)
    good, bad = (jobs.wait(j, roots, timeout_s=240) for j in started)  # newest first
    assert good.returncode == 0, jobs.tail(good)
    assert list((root / "engines").glob("*/calib-*-max.cache"))
    at = page("run", job=good.id)
    assert "calibrate finished" in texts(at.success)
    assert "cache:" in texts(at.code)
    assert bad.returncode == 1, jobs.tail(bad)
    at = page("run", job=bad.id)
    assert "error: could not load a Wav2Vec2ForCTC" in texts(at.error)


def _private_root(artifacts, tmp_path) -> ArtifactRoots:
    """A root of its own (both sets, the tiny model) for tests that may start jobs."""
    root = tmp_path / "art"
    shutil.copytree(artifacts.calib.path, root / "calib_sets" / "unit-calib")
    shutil.copytree(artifacts.eval.path, root / "calib_sets" / "unit-eval")
    shutil.copytree(artifacts.model, root / "models" / "tiny")
    return ArtifactRoots(root)


def test_jobs_are_refused_by_the_jobs_own_input_checks_before_anything_starts(
    artifacts, tmp_path, monkeypatch
) -> None:
    """The checks each job's ``run`` starts with (so the CLI verb's too) refuse bad inputs on the Run page."""
    from workbench.calibration.methods import MethodSpec
    from workbench.errors import WorkbenchError
    from workbench.jobs import calibrate, compare, search, signoff

    roots = _private_root(artifacts, tmp_path)
    monkeypatch.setenv(ENV_VAR, str(roots.root))
    model, calib, ev = roots.models / "tiny", roots.calib_sets / "unit-calib", roots.calib_sets / "unit-eval"
    where = {"engines": roots.engines, "calib_root": roots.calib_sets}
    refused = {
        "no speech set": calibrate.CalibrateInputs(
            model, roots.calib_sets / "missing", MethodSpec("max"), **where
        ),
        "model folder .* does not exist": calibrate.CalibrateInputs(
            roots.models / "gone", calib, MethodSpec("max"), **where
        ),
        "--method must be one of": compare.CompareInputs(model, calib, method="kl", **where),
        "--per-condition must be at least 1": compare.CompareInputs(model, calib, per_condition=0, **where),
        "--candidate .* is not a file": compare.CompareInputs(
            model, calib, candidate=tmp_path / "x.onnx", **where
        ),
        "is the sign-off set": search.SearchInputs(
            model, calib, dev_set=str(ev), signoff_set=str(ev), **where
        ),
        "--resamples must be at least 100": search.SearchInputs(model, calib, resamples=10, **where),
        "give --calib-set": signoff.SignoffInputs(ev, roots.reports / "r", model=model, **where),
        "candidate fp32 .* does not exist": signoff.SignoffInputs(
            ev, roots.reports / "r", candidates=[("fp32", tmp_path / "a.onnx")], **where
        ),
    }
    for message, inputs in refused.items():
        with pytest.raises(WorkbenchError, match=message):
            jobs.start(inputs, roots, max_jobs=5)
        with pytest.raises(WorkbenchError, match=message):  # the same check where the CLI verb meets it
            importlib.import_module(type(inputs).__module__).run(inputs)
    assert not jobs.jobs_root(roots).exists() and not (
        roots.engines.exists() and any(roots.engines.iterdir())
    )
    # through the Run page's search form: the job's message on the page, and nothing started
    at = page("run")
    at.selectbox(key="search-dev").select("unit-eval")
    at.selectbox(key="search-signoff-set").select("unit-eval")
    at.form_submit_button[2].click().run()
    assert not at.exception
    assert "the dev set unit-eval is the sign-off set" in texts(at.error)
    assert not jobs.jobs_root(roots).exists()


@pytest.mark.slow
def test_job_limit_refuses_the_next_job_with_a_message(artifacts, tmp_path, monkeypatch) -> None:
    roots = _private_root(artifacts, tmp_path)
    monkeypatch.setenv(ENV_VAR, str(roots.root))
    monkeypatch.setenv(access.MAX_JOBS_ENV, "1")
    at = page("run")
    assert "0 of at most 1 jobs running" in texts(at.caption)
    at.selectbox(key="cal-model").select("models/tiny")
    at.form_submit_button[
        0
    ].click().run()  # a real calibration: starting Python and torch alone takes seconds
    first = jobs.list_jobs(roots)
    assert len(first) == 1 and "already running" not in texts(at.error)
    try:
        at.selectbox(key="cal-method").select("max")
        at.form_submit_button[0].click().run()
        assert first[0].running, (
            "the first job ended before the second was asked for; the limit was not tested"
        )
        assert not at.exception
        assert (
            "1 job already running and this dashboard runs at most 1 at once; wait for one to finish or stop "
            "one under Jobs below"
        ) in texts(at.error)
        assert [j.id for j in jobs.list_jobs(roots)] == [first[0].id]
        at = page("run", job=first[0].id)
        assert "1 of at most 1 jobs running" in texts(at.caption)
    finally:
        jobs.stop(first[0])
        jobs.wait(first[0], roots, timeout_s=120)
    at = page("run")  # once it has ended, the next job may start
    at.selectbox(key="cal-model").select("models/tiny")
    at.selectbox(key="cal-method").select("max")
    at.form_submit_button[0].click().run()
    assert "already running" not in texts(at.error) and len(jobs.list_jobs(roots)) == 2
    jobs.stop(jobs.list_jobs(roots)[0])
    jobs.wait(jobs.list_jobs(roots)[0], roots, timeout_s=120)


# ---------------------------------------------------------------- access


def test_read_only_mode_renders_no_run_page_and_no_downloads(artifacts, access_env) -> None:
    from streamlit import config

    from workbench.dashboard.navigation import page_urls

    pages = ("home", "sets", "calibration", "layers", "tradeoff", "signoff")
    offered = {name: len(page(name).download_button) for name in pages}
    assert offered["signoff"] >= 3 and offered["calibration"] >= 1  # what read-only mode takes away
    access_env.setenv(access.READ_ONLY_ENV, "1")
    for name in pages:
        at = page(name)
        assert not at.exception, name
        assert len(at.download_button) == 0, name
        assert "Downloads" not in [h.value for h in at.subheader], name
    assert "run" not in page_urls(access.read_settings()) and "signoff" in page_urls(access.read_settings())
    at = page("run")  # even when reached some other way, the page starts nothing
    assert "read-only" in texts(at.error) and len(at.form_submit_button) == 0 and not at.tabs
    at = AppTest.from_file(str(APP), default_timeout=60).run()  # the app as served
    assert not at.exception
    assert "read-only: no Run page, no downloads" in texts(at.caption)
    assert "this machine only: http://127.0.0.1:" in texts(at.caption)
    assert config.get_option("client.disableDataExport") is True  # no CSV button on tables either


TOKEN = "app-test-token-0123456789abcdef"


def _assert_locked(at: AppTest) -> None:
    """Only the sign-in (or why nothing is shown): no page content at all."""
    assert not at.exception
    assert not at.metric and not at.tabs and not at.selectbox and not at.dataframe and not at.download_button
    assert [t.value for t in at.title] == ["Speech precision workbench"]
    shown = texts(at.markdown) + texts(at.caption) + texts(at.info)
    assert "Artifacts under" not in shown and "Reachable from" not in shown


def test_wrong_or_missing_token_shows_only_the_sign_in(artifacts, access_env) -> None:
    access_env.setenv(access.TOKEN_ENV, TOKEN)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    _assert_locked(at)
    assert [t.label for t in at.text_input] == ["Access token"]
    at.form_submit_button[0].click().run()
    _assert_locked(at)
    assert "Enter the access token." in texts(at.error)
    for wrong in ("not-the-token", TOKEN[:-1], TOKEN + "x", TOKEN.upper()):
        at.text_input[0].input(wrong)
        at.form_submit_button[0].click().run()
        _assert_locked(at)
        assert "That access token is not right." in texts(at.error), wrong
    at.text_input[0].input(TOKEN)
    at.form_submit_button[0].click().run()
    assert not at.exception and not at.text_input
    assert {m.label for m in at.metric} >= {"speech sets", "sign-off reports"}
    assert "visitors need the access token" in texts(at.caption)
    at.run()  # the session stays signed in
    assert at.metric


def test_bad_access_settings_and_an_open_address_without_access_control_show_nothing(
    artifacts, access_env, tmp_path
) -> None:
    from streamlit import config

    readable = tmp_path / "token.txt"
    readable.write_text(TOKEN)
    readable.chmod(0o644)
    access_env.setenv(access.TOKEN_FILE_ENV, str(readable))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    _assert_locked(at)
    assert "can be read by other users" in texts(at.error) and not at.text_input
    access_env.delenv(access.TOKEN_FILE_ENV)
    config.set_option("server.address", "0.0.0.0")  # as `streamlit run app.py --server.address 0.0.0.0`
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    _assert_locked(at)
    assert "no access control is set, so it shows nothing" in texts(at.error)
    access_env.setenv(access.TOKEN_ENV, TOKEN)  # with a token it asks for it
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    _assert_locked(at)
    assert [t.label for t in at.text_input] == ["Access token"]


def test_oidc_login_fails_closed_without_provider_settings_and_otherwise_offers_only_the_login(
    artifacts, access_env
) -> None:
    access_env.setenv(access.AUTH_ENV, "oidc")
    access_env.setenv(access.ALLOWED_USERS_ENV, "@example.com")
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    _assert_locked(at)
    assert "no `[auth]` section" in texts(at.error) and not at.button
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.secrets["auth"] = {
        "redirect_uri": "http://localhost:8501/oauth2callback",
        "cookie_secret": "x" * 32,
        "client_id": "id",
        "client_secret": "secret",
        "server_metadata_url": "https://idp.example.com/.well-known/openid-configuration",
    }
    at.run()
    _assert_locked(at)
    assert [b.label for b in at.button] == ["Log in"] and not at.error


def test_tradeoff_page_draws_the_serving_benchmark_of_a_record(artifacts, tmp_path, monkeypatch) -> None:
    """A record with a serving section (measured here by the real serving benchmark on the fixture's FP32 and
    INT8 candidates) gets the p99-against-load chart and the capacity table; numbers equal the record's."""
    from functools import partial

    from workbench.backends.onnxruntime import OnnxRuntimeRunner
    from workbench.evaluate.batching import BatchPolicy
    from workbench.inputs.serving import ServingConfig
    from workbench.model.description import describe_model
    from workbench.report.record import record_digest
    from workbench.serving.measure import RequestSet, measure_serving, serving_record

    root = copy_artifacts(artifacts.root, tmp_path / "art")
    model = describe_model(artifacts.model)
    config = ServingConfig(
        p99_ms=5000.0, rates=(20.0, 40.0), seconds_per_rate=0.5, max_batch=2, budget_s=10.0
    )
    requests = RequestSet.of(
        [artifacts.eval.audio(u) for u in artifacts.eval.utterances], model.prepare, None
    )
    paths = {"fp32": artifacts.calibrated.fp32_onnx, "int8-entropy": artifacts.calibrated.int8_onnx}
    results = measure_serving(
        [(n, partial(OnnxRuntimeRunner, p, threads=1)) for n, p in paths.items()],
        lambda runner: BatchPolicy.for_runner(runner, model, 2),
        requests,
        config,
    )
    record_path = root / "reports" / "unit-signoff" / "report.json"
    record = json.loads(record_path.read_text())
    record["serving"] = serving_record(results, config, "ort-cpu", requests)
    record["record_sha256"] = record_digest(record)
    record_path.write_text(json.dumps(record))
    monkeypatch.setenv(ENV_VAR, str(root))
    at = page("tradeoff")
    assert not at.exception
    assert "Serving: latency against offered load" in texts(at.subheader)
    assert "capacity picks the winner" in texts(at.caption)
    summary = next(d.value for d in at.dataframe if "capacity QPS" in d.value.columns)
    for name, cand in record["serving"]["candidates"].items():
        row = summary.set_index("candidate").loc[name]
        assert (
            row["capacity QPS"] == cand["capacity_qps"] and row["one request ms"] == cand["single_request_ms"]
        )
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert any("p99 against offered load" in json.dumps(s.get("title", "")) for s in specs)


def test_run_page_starts_a_project_run_and_shows_its_summary_and_exit_status(tmp_path, monkeypatch) -> None:
    """The tiny project of tests/test_project_run.py (search off, to keep it short) inside the workspace: a bad
    project file beside it is refused at the form; the good one runs in the background and its summary shows."""
    from conftest import _speech_like
    from test_project_run import loosen, write_corpus

    from workbench.config import RUN_NOTHING_PASSES
    from workbench.model.synthetic import save_random_wav2vec2
    from workbench.project.file import load_project
    from workbench.project.starter import write_starter

    root = tmp_path / "ws"
    folder = root / "project"
    save_random_wav2vec2(folder / "model", "tiny", seed=0)
    write_corpus(folder / "corpus", _speech_like)
    config = write_starter(folder / "model", folder / "corpus", folder)
    loosen(config)
    config.write_text(config.read_text().replace("# enabled = true", "enabled = false"))
    (root / "bad").mkdir()
    (root / "bad" / "workbench.toml").write_text("[nonsense]\n")
    monkeypatch.setenv(ENV_VAR, str(root))
    roots = ArtifactRoots(root)
    at = page("run")
    assert not at.exception
    assert at.selectbox(key="run-project").options == ["bad/workbench.toml", "project/workbench.toml"]
    at.selectbox(key="run-project").select("bad/workbench.toml")
    at.form_submit_button[0].click().run()
    assert not at.exception
    assert "project file" in texts(at.error) and not jobs.list_jobs(roots)
    at.selectbox(key="run-project").select("project/workbench.toml")
    at.form_submit_button[0].click().run()
    assert not at.exception
    (job,) = jobs.list_jobs(roots)
    assert job.kind == "run" and job.argv[1:] == ["-m", "workbench", "run", "--config", str(config)]
    job = jobs.wait(job, roots, timeout_s=500)
    log = jobs.tail(job)
    assert job.returncode == 0, log
    assert "] signoff-tensorrt: ran" in log and "] search" not in log
    assert jobs.progress("[2/4] calibrate: running\n").label == "step 2/4 calibrate"
    at = page("run", job=job.id)
    assert not at.exception
    assert "exit status 0: a candidate besides the FP32 baseline passes" in texts(at.success)
    name = load_project(config).name
    assert f"# workbench run: {name}" in texts(at.markdown) and "| signoff-tensorrt | ran |" in texts(
        at.markdown
    )
    assert f"$ python -m workbench run --config {config}" in texts(at.code)
    assert (root / "reports" / name / "summary.md").is_file()
    # the same project timed on ONNX Runtime CPU against a latency gate no run meets: nothing passes (exit 3)
    text = config.read_text().replace("[gates]", "[gates]\nmax_latency_ms = 0.001")
    text = text.replace("latency = false", "latency = true").replace('name = "tensorrt"', 'name = "ort-cpu"')
    text = text.replace("# latency_batch_sizes = [1, 8, 32]", "latency_batch_sizes = [1]")
    config.write_text(text.replace("# latency_repeats = 10", "latency_repeats = 3"))
    at.selectbox(key="run-project").select("project/workbench.toml")
    at.form_submit_button[0].click().run()
    assert not at.exception
    job = jobs.wait(jobs.list_jobs(roots)[0], roots, timeout_s=500)
    assert job.returncode == RUN_NOTHING_PASSES, jobs.tail(job)
    assert "] calibrate: reused" in jobs.tail(job)
    at = page("run", job=job.id)
    assert f"exit status {RUN_NOTHING_PASSES}: on a target no candidate" in texts(at.warning)
    assert "| signoff-ort-cpu | ran |" in texts(at.markdown)

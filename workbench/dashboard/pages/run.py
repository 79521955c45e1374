"""Run page: start ``workbench run`` on a project file of the workspace (``dashboard.project_runs``), or a
calibration, layer comparison, search or sign-off job in the background (its typed inputs run by
``python -m workbench.jobs``) for the demo model shipped in the package or any model folder under
the workspace's models/ (or a Hugging Face hub id) and any set under calib_sets/, then follow its progress
and log; errors are shown as the job printed them..

Every start goes through ``background.start``: the job's own input checks (the ones the CLI verb runs)
and the dashboard's job limit; a refusal is shown and nothing starts. In read-only mode the page is not
registered at all and, if reached anyway, shows nothing but that."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import streamlit as st

from workbench.calibration.methods import METHODS, MethodSpec
from workbench.config import BACKENDS, DEFAULT_BACKEND, DEFAULT_METHOD, DEFAULT_TARGET, RUN_NOTHING_PASSES
from workbench.dashboard import background, project_runs, ui
from workbench.dashboard.data.sets import set_names
from workbench.dashboard.paths import ArtifactRoots, OutsideArtifacts, resolve
from workbench.errors import WorkbenchError
from workbench.evaluate.latency import LatencyConfig
from workbench.jobs import calibrate, compare, search, signoff
from workbench.resources import demo_model_dir
from workbench.values import parse_positive_ints

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
REPORT_NAME = re.compile(r"^[A-Za-z0-9][\w.-]{0,79}$")
DEMO_LABEL = "demo model (shipped with the package)"


def model_options(roots: ArtifactRoots) -> dict[str, str]:
    """label -> model path: the shipped demo model and every folder under the workspace's models/ with a
    config.json."""
    out = {}
    demo = demo_model_dir()
    if (demo / "config.json").is_file():
        out[DEMO_LABEL] = str(demo)
    if roots.models.is_dir():
        for folder in sorted(roots.models.iterdir()):
            if (folder / "config.json").is_file() and folder.resolve() != demo.resolve():
                out[f"models/{folder.name}"] = str(folder)
    return out


def resolve_model(choice: str, typed: str, options: dict[str, str], roots: ArtifactRoots) -> str:
    """The model argument for the CLI: the typed folder under models/ or hub id if any, else the listed choice."""
    typed = typed.strip()
    if not typed:
        if choice not in options:
            raise WorkbenchError("no model folder found; put one under models/ or type a Hugging Face hub id")
        return options[choice]
    try:
        folder = resolve(typed, "models", roots)
    except OutsideArtifacts:
        if HUB_ID.match(typed) and not (roots.models / typed).exists() and not typed.startswith("."):
            return typed
        raise
    if not (folder / "config.json").is_file():
        raise WorkbenchError(f"{typed} has no config.json; point to a Hugging Face Wav2Vec2ForCTC folder")
    return str(folder)


def _model_inputs(prefix: str, roots: ArtifactRoots) -> tuple[str, str, dict[str, str]]:
    options = model_options(roots)
    choice = st.selectbox("Model", list(options), key=f"{prefix}-model")
    typed = st.text_input(
        "…or another model: a folder under models/ or a Hugging Face hub id (used when filled)",
        key=f"{prefix}-model-path",
        placeholder="my-model or facebook/wav2vec2-base-960h",
    )
    return choice, typed, options


def _set_path(name: str | None, roots: ArtifactRoots, role: str) -> str:
    if not name:
        raise WorkbenchError(f"choose a {role} set (build one with `python -m workbench data build`)")
    return str(resolve(name, "calib_sets", roots))


def _index_of(preferred: str, names: list[str], fallback: int = 0) -> int:
    """Where a selectbox over ``names`` starts: the demo set when present, else ``fallback``."""
    return names.index(preferred) if preferred in names else fallback


def _start(inputs: Any, roots: ArtifactRoots) -> None:
    _launch(lambda: background.start(inputs, roots, ui.settings().max_jobs))


def _launch(start: Callable[[], background.Job]) -> None:
    """Start a background job (a single job or a project run): its refusal as one error, else select and announce it."""
    try:
        job = start()
    except WorkbenchError as exc:
        st.error(str(exc), icon=":material/block:")
        return
    st.session_state["job"] = job.id
    st.query_params["job"] = job.id
    st.toast(f"started {job.kind}: {job.id}")


def _backend(prefix: str, column: Any = st, what: str = "Backend (where the model runs)") -> str:
    """The backend selectbox every form has (the job's check refuses one this machine lacks)."""
    return column.selectbox(what, BACKENDS, index=BACKENDS.index(DEFAULT_BACKEND), key=f"{prefix}-backend")


def _ray(prefix: str, column: Any = st) -> str | None:
    """The dashboard's Ray cluster (``dashboard --ray``) when the form's box is ticked; no box without one."""
    address = ui.settings().ray
    if address is None:
        return None
    return address if column.checkbox(f"Run on the Ray cluster {address}", key=f"{prefix}-ray") else None


def calibrate_inputs(
    model: str,
    calib: str,
    method: str,
    percentile: float,
    roots: ArtifactRoots,
    backend: str = DEFAULT_BACKEND,
    ray: str | None = None,
) -> calibrate.CalibrateInputs:
    return calibrate.CalibrateInputs(
        model,
        calib,
        MethodSpec(method, percentile),
        engines=roots.engines,
        calib_root=roots.calib_sets,
        backend=backend,
        ray=ray,
    )


def signoff_inputs(
    model: str,
    calib: str,
    evaluation: str,
    method: str,
    name: str,
    batch_sizes: str | None,
    limit: int,
    roots: ArtifactRoots,
    backend: str = DEFAULT_BACKEND,
    target: str = DEFAULT_TARGET,
    ray: str | None = None,
) -> signoff.SignoffInputs:
    """Sign-off of FP32/FP16/INT8 variants built from the model, report into reports/<name>."""
    if not REPORT_NAME.match(name):
        raise WorkbenchError("report name: letters, digits, '.', '_' or '-' (no folders)")
    latency = (
        None
        if batch_sizes is None
        else LatencyConfig(parse_positive_ints(batch_sizes.replace(" ", ""), "latency batch sizes"))
    )
    return signoff.SignoffInputs(
        eval_set=evaluation,
        out_dir=roots.reports / name,
        model=model,
        calib_set=calib,
        method=method,
        latency=latency,
        limit=limit or None,
        engines=roots.engines,
        calib_root=roots.calib_sets,
        backend=backend,
        target=target,
        ray=ray,
    )


def _calibrate_form(roots: ArtifactRoots, names: list[str]) -> None:
    with st.form("calibrate"):
        choice, typed, options = _model_inputs("cal", roots)
        calib = st.selectbox("Calibration set", names, key="cal-set", index=_index_of("demo-calib", names))
        method = st.selectbox("Method", METHODS, index=METHODS.index(DEFAULT_METHOD), key="cal-method")
        percentile = st.number_input(
            "Percentile (percentile method)", 90.0, 100.0, 99.99, 0.01, format="%.2f", key="cal-percentile"
        )
        backend = _backend("cal")
        ray = _ray("cal")
        if st.form_submit_button("Start calibration", type="primary", icon=":material/play_arrow:"):
            try:
                inputs = calibrate_inputs(
                    resolve_model(choice, typed, options, roots),
                    _set_path(calib, roots, "calibration"),
                    method,
                    percentile,
                    roots,
                    backend,
                    ray,
                )
            except WorkbenchError as exc:
                st.error(str(exc))
                return
            _start(inputs, roots)


def _signoff_form(roots: ArtifactRoots, names: list[str]) -> None:
    with st.form("signoff"):
        choice, typed, options = _model_inputs("so", roots)
        c1, c2 = st.columns(2)
        calib = c1.selectbox("Calibration set", names, key="so-calib", index=_index_of("demo-calib", names))
        evaluation = c2.selectbox(
            "Evaluation set",
            names,
            key="so-eval",
            index=_index_of("demo-eval", names, min(1, len(names) - 1)),
        )
        method = c1.selectbox("Method for the INT8 variant", METHODS, key="so-method")
        name = c2.text_input("Report name (folder under reports/)", "signoff-ui", key="so-name")
        batch = c1.text_input("Latency batch sizes", "1,8", key="so-batch")
        limit = c2.number_input("Score only the first N utterances (0 = all)", 0, 100000, 0, key="so-limit")
        backend = _backend("so", c1)
        target = c2.selectbox(
            "Deployment target (a winner is picked only from latency measured there)",
            BACKENDS,
            index=BACKENDS.index(DEFAULT_TARGET),
            key="so-target",
        )
        no_latency = st.checkbox("Accuracy only (no latency runs)", key="so-nolat")
        ray = _ray("so")
        if st.form_submit_button("Start sign-off", type="primary", icon=":material/play_arrow:"):
            try:
                if calib == evaluation:
                    raise WorkbenchError("the evaluation set must differ from the calibration set")
                inputs = signoff_inputs(
                    resolve_model(choice, typed, options, roots),
                    _set_path(calib, roots, "calibration"),
                    _set_path(evaluation, roots, "evaluation"),
                    method,
                    name,
                    None if no_latency else batch,
                    int(limit),
                    roots,
                    backend,
                    target,
                    ray,
                )
            except WorkbenchError as exc:
                st.error(str(exc))
                return
            _start(inputs, roots)


def analysis_inputs(
    verb: str,
    model: str,
    calib: str,
    method: str,
    per_condition: int,
    granularity: str,
    dev: str | None,
    roots: ArtifactRoots,
    signoff_set: str | None = None,
    backend: str = DEFAULT_BACKEND,
    ray: str | None = None,
) -> compare.CompareInputs | search.SearchInputs:
    """Inputs of the ``compare`` job (layer table + sensitivity) or the ``search`` job (mixed plan)."""
    shared: dict[str, Any] = {  # the fields both jobs' inputs share (each dataclass checks its own)
        "model": model,
        "calib_set": calib,
        "method": method,
        "engines": roots.engines,
        "per_condition": int(per_condition),
        "granularity": granularity,
        "calib_root": roots.calib_sets,
        "backend": backend,
        "ray": ray,
    }
    if verb == "compare":
        return compare.CompareInputs(**shared)
    return search.SearchInputs(**shared, dev_set=dev or None, signoff_set=signoff_set or None)


def _analysis_form(verb: str, roots: ArtifactRoots, names: list[str]) -> None:
    with st.form(verb):
        st.caption(
            "Layer-by-layer FP32 vs INT8 table and per-group sensitivity ranking (Layers page)"
            if verb == "compare"
            else "Mixed INT8/FP16 plan with the most INT8 within the WER budget (Trade-off page, search records)"
        )
        choice, typed, options = _model_inputs(verb, roots)
        c1, c2 = st.columns(2)
        calib = c1.selectbox(
            "Calibration set", names, key=f"{verb}-set", index=_index_of("demo-calib", names)
        )
        method = c2.selectbox("Method", METHODS, key=f"{verb}-method")
        per_condition = c1.number_input(
            "Clips per condition (layer table, sensitivity)", 1, 1000, 4, key=f"{verb}-per-condition"
        )
        granularity = c2.selectbox("Granularity", ["group", "node"], key=f"{verb}-granularity")
        backend = _backend(verb, c1)
        dev = signoff_set = None
        if verb == "search":
            dev = c1.selectbox(
                "Dev set for WER during the search (not the sign-off evaluation set)",
                ["(the calibration set)", *names],
                key="search-dev",
            )
            signoff_set = c2.selectbox(
                "Sign-off set (its size widens the dev intervals)",
                ["(none)", *names],
                key="search-signoff-set",
            )
        ray = _ray(verb)
        if st.form_submit_button(f"Start {verb}", type="primary", icon=":material/play_arrow:"):
            try:
                inputs = analysis_inputs(
                    verb,
                    resolve_model(choice, typed, options, roots),
                    _set_path(calib, roots, "calibration"),
                    method,
                    per_condition,
                    granularity,
                    _set_path(dev, roots, "dev") if dev and dev in names else None,
                    roots,
                    _set_path(signoff_set, roots, "sign-off") if signoff_set in names else None,
                    backend,
                    ray,
                )
            except WorkbenchError as exc:
                st.error(str(exc))
                return
            _start(inputs, roots)


def _project_form(roots: ArtifactRoots) -> None:
    """Pick a ``workbench.toml`` of the workspace and start ``workbench run`` on it."""
    files = project_runs.project_files(roots)
    if not files:
        st.info(
            "No workbench.toml in the workspace: write one with `python -m workbench init --model DIR --data PATH` "
            "in the workspace folder (docs/own-model.md).",
            icon=":material/info:",
        )
        return
    labels = [str(p.relative_to(roots.root)) for p in files]
    with st.form("project-run"):
        st.caption(
            "Every step of the project in order (sets, calibrate, compare, search, a sign-off per target), each "
            "reused when its inputs are unchanged; one report per target and reports/<project>/summary.md"
        )
        choice = st.selectbox("Project file", labels, key="run-project")
        if st.form_submit_button("Start workbench run", type="primary", icon=":material/play_arrow:"):
            project = files[labels.index(choice)]
            _launch(lambda: project_runs.start_run(project, roots, ui.settings().max_jobs))


def _ended_run(job: background.Job, roots: ArtifactRoots, log: str) -> None:
    """A project run that has ended: what its exit status means and its summary.md."""
    words = project_runs.exit_words(job.returncode if job.returncode is not None else -1)
    if job.returncode == 0:
        st.success(f"run finished at {job.finished}: {words}", icon=":material/check_circle:")
    elif job.returncode == RUN_NOTHING_PASSES:
        st.warning(f"run finished at {job.finished}: {words}", icon=":material/report:")
    else:
        errors = background.error_lines(log) or ["no error message in the log; see below"]
        st.error("\n\n".join([words, *errors]), icon=":material/error:")
    summary = project_runs.summary_of(job, roots)
    if summary is not None:
        st.markdown(summary)


def _show_job(job_id: str) -> None:
    roots = ui.roots()
    try:
        job = background.load(job_id, roots)
    except (WorkbenchError, OSError, ValueError, KeyError) as exc:
        st.error(f"cannot read job {job_id}: {exc}")
        return
    raw = background.raw_tail(job)
    log = background.tail(job)
    state = job.state
    st.markdown(f"**{job.kind}** · started {job.started} · **{state}**")
    st.code(
        f"$ {background.command_text(job.argv)}\n{background.inputs_text(job)}",
        language="bash",
        wrap_lines=True,
    )
    if job.running:
        prog = background.progress(raw)
        st.progress(prog.fraction if prog.fraction is not None else 0.0, text=prog.label)
        if st.button("Stop", key=f"stop-{job.id}", icon=":material/stop:"):
            background.stop(job)
    elif job.kind == project_runs.KIND:
        _ended_run(job, roots, log)
    elif job.returncode == 0:
        st.success(f"{job.kind} finished at {job.finished}", icon=":material/check_circle:")
    else:
        errors = background.error_lines(log) or ["no error message in the log; see below"]
        st.error("\n\n".join(errors), icon=":material/error:")
    st.code(log[-6000:] or "(no output yet)", language="text", wrap_lines=True)
    if not job.running and st.session_state.get("polling") == job.id:
        st.session_state["polling"] = None
        st.rerun(scope="app")


def render() -> None:
    st.title("Run")
    settings = ui.settings()
    if settings.read_only:
        st.error("This dashboard is read-only: it starts no jobs.")
        return
    roots = ui.roots()
    st.caption(f"{len(background.running_jobs(roots))} of at most {settings.max_jobs} jobs running")
    names = set_names(roots)
    if not names:
        st.subheader("Project")
        _project_form(roots)
        ui.empty_state(
            "speech sets",
            "python -m workbench data build",
            "Calibration, search and sign-off on their own all need a set under calib_sets/ (a project run makes "
            "its own).",
        )
    else:
        tab_project, tab_cal, tab_compare, tab_search, tab_signoff = st.tabs(
            ["Project (workbench run)", "Calibrate", "Compare layers", "Search", "Sign-off"]
        )
        with tab_project:
            _project_form(roots)
        with tab_cal:
            _calibrate_form(roots, names)
        with tab_compare:
            _analysis_form("compare", roots, names)
        with tab_search:
            _analysis_form("search", roots, names)
        with tab_signoff:
            _signoff_form(roots, names)
    st.subheader("Jobs")
    all_jobs = background.list_jobs(roots)
    if not all_jobs:
        st.caption("No job started from the dashboard yet.")
        return
    ids = [j.id for j in all_jobs]
    current = st.session_state.get("job")
    if current in ids and st.query_params.get("job") != current:
        st.query_params["job"] = current
    job_id = ui.pick("Job", ids, "job", "reports")
    job = all_jobs[ids.index(job_id)]
    running = job.running
    if running:
        st.session_state["polling"] = job.id
    st.fragment(_show_job, run_every=1.5 if running else None)(job_id)

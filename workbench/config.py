"""Typed defaults: the one place where the workbench's default values live."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# ops whose float inputs get INT8 Q/DQ, and so the tensors calibration measures (the inputs of these)
QUANTIZABLE_OPS = ("MatMul", "Gemm", "Conv")

SAMPLE_RATE = 16_000

# Where artifacts go is the workspace (workbench/workspace.py: --workspace, $WORKBENCH_WORKSPACE, else the
# current directory), never the package's own folder. The demo model is package data under this name
# (workbench/resources.py reads it through importlib.resources).
DEMO_MODEL_RESOURCE = "demo_model"

CONDITIONS: tuple[str, ...] = ("quiet", "noisy", "accented")
LAYOUTS: tuple[str, ...] = (
    "librispeech",
    "commonvoice",
    "folder",
    "manifest",
    "hf",
)  # sources of real speech
NOISY_CONDITION = "noisy"
REVERBERANT_CONDITION = "noisy-reverberant"  # the noisy condition after a room impulse response (--rir-dir)
UNLABELLED_ACCENT = "unknown"  # Common Voice clips whose speaker gave no accent
UNLABELLED_ACCENT_CONDITION = "accent-unknown"  # their own condition row, neither quiet nor accented
NOISE_KINDS: tuple[str, ...] = ("white", "pink", "brown", "babble", "hum")
MAJORITY_ACCENT = "us"
# Weights of the ONNX Runtime CPU flavour (calibrate --ort-cpu): "auto" = int8 where ORT's U8S8 GEMMs are exact on
# this CPU (VNNI, or not x86), else uint8 (U8U8, exact everywhere); "u8" / "s8" for a file bound elsewhere.
ORT_CPU_WEIGHTS = "auto"
ORT_CPU_WEIGHT_TYPES: tuple[str, ...] = ("auto", "u8", "s8")


@dataclass(frozen=True)
class EngineProfile:
    """Audio durations (seconds) an engine profile accepts; set buckets follow it."""

    min_s: float = 1.0
    opt_s: float = 4.0
    max_s: float = 8.0

    def __post_init__(self) -> None:
        if not (0 < self.min_s <= self.opt_s <= self.max_s):
            raise ValueError(
                f"engine profile needs 0 < min <= opt <= max seconds, got "
                f"{self.min_s}/{self.opt_s}/{self.max_s}"
            )

    def buckets(self) -> tuple[tuple[str, float, float], ...]:
        """Duration buckets ``(name, lo, hi)``: [min, opt) is short, [opt, max] is long."""
        return (
            ("short", self.min_s, self.opt_s),
            ("long", self.opt_s, self.max_s),
        )

    def bucket_of(self, duration_s: float) -> str | None:
        """The bucket a clip of this duration falls in, or None when outside the profile."""
        for name, lo, hi in self.buckets():
            if lo <= duration_s < hi or (name == "long" and duration_s == hi):
                return name
        return None


@dataclass(frozen=True)
class ConditionRanges:
    """Ranges the speech conditions draw from."""

    quiet_snr_db: tuple[float, float] = (30.0, 45.0)
    noisy_snr_db: tuple[float, float] = (0.0, 20.0)
    level_dbfs: tuple[float, float] = (-35.0, -15.0)
    noise_kinds: tuple[str, ...] = NOISE_KINDS


@dataclass(frozen=True)
class SetBuildConfig:
    """How ``data build`` makes a calibration set and an evaluation set.

    ``profile`` None: derived from the source's durations (shortest, median, longest); synthetic
    speech, which is made to fit a profile, uses ``EngineProfile()`` then.
    """

    name: str = "demo"
    calib_per_condition: int = 100
    # 200 per condition (~6,000 words). At 100 the 0.3-point gate is about one half-width of
    # a plan's speaker-block WER-delta interval: a plan that changed a dozen words both ways fails it with
    # a delta of +0.10 (demo seed 2: +0.10 [-0.19, +0.46] on 300 utterances; the same plan on 600:
    # -0.02 [-0.20, +0.22], PASS). Fewer than 40 lets one changed word move the upper end past the gate.
    eval_per_condition: int = 200
    # a held-out dev set <name>-dev (0: none; synthetic speech only): speakers and texts of neither other set,
    # for the mixed-precision search to select on (the demo asks for DEMO_DEV_PER_CONDITION)
    dev_per_condition: int = 0
    seed: int = 0
    # synthetic speech: a numbered draw of the evaluation and dev sets beside the same calibration set (the same
    # bytes). 0: the seed's own sets; another number draws new evaluation and dev speakers (among the speakers never
    # in calibration: the basic voices' evaluation third and the extra voices), texts, noise, levels and voices
    # (benchmarks/search_replication.py draws 1, 2, ...; workbench.speech.split.redraw_held_out)
    draw: int = 0
    profile: EngineProfile | None = None
    conditions: ConditionRanges = field(default_factory=ConditionRanges)
    workers: int = 2
    noise_dir: Path | None = None  # recorded noise for the noisy condition (else generated noise)
    rir_dir: Path | None = None  # room impulse responses: adds the reverberant noisy condition
    # synthetic speech: more speakers for the evaluation and dev sets (workbench.speech.tts.extra_voices; never the
    # calibration set's). Intervals narrow with speakers: with the basic voices alone the demo's quiet and noisy
    # rows had 5 evaluation and 6 dev speakers, and the search passed no plan with a real INT8 share
    extra_voices: bool = True


@dataclass(frozen=True)
class AudioPlausibility:
    """What an imported clip must look like to be taken as one spoken utterance. A clip outside it is named at
    import: a calibration import skips it, an evaluation import refuses (``--skip-implausible`` skips it)."""

    min_rate_hz: int = 4_000  # a header below this holds no speech band (telephone audio is 8 kHz)
    max_rate_hz: int = 384_000  # above what any audio interface records
    max_clip_s: float = 600.0  # longer is a whole recording, not an utterance (checked before decoding)
    # a derived engine profile is shaped by the clips within this factor of the median duration; the others
    # are listed at import and on the card (a 2-hour clip must not stretch an engine's profile to 2 hours)
    profile_outlier_factor: float = 10.0


@dataclass(frozen=True)
class ImportDefaults:
    """Defaults of ``data import`` (a whole source stored as one calibration or evaluation set)."""

    role: str = "eval"
    workers: int = 2
    noisy_share: float = 0.0  # share of quiet clips that also get a noisy copy (0: none)
    in_flight_per_worker: int = 4  # decoded clips queued per worker: bounds memory, keeps workers busy


# The demo's evaluation and held-out dev sets per condition (``data build`` keeps 200 evaluation utterances and no
# dev set by default). The search evaluates every candidate on the dev set, block by block
# (SearchConfig.dev_blocks), and the sign-off every candidate on the evaluation set, so their sizes are most of
# the demo's cost; they are what lets the 0.3-point gate pass a plan with a real INT8 share. On the shipped model
# (2d7ee7105b49) with 150 dev and 200 evaluation utterances per condition (450 and 600 made) the search kept 22 %
# of the multiply-accumulates in INT8 and that plan failed the sign-off (+0.23 [.., +0.37]); with 450 and 400
# requested (1,058 and 1,116 made: the long texts run out) it kept 69 % and the plan passed; with 450 and 300 (1,058
# and 898 made, 152 evaluation speakers) it keeps the same plan, which passes at +0.10 [-0.08, +0.28], in 5 min 49 s
# instead of 6 min 17 s (docs/demo.md, benchmarks/results/demo_time.json). More utterances from the same speakers
# narrow the intervals less than more speakers do (SetBuildConfig.extra_voices); the search predicts the sign-off's
# intervals from the two sets' speakers (docs/compare-and-search.md)
DEMO_DEV_PER_CONDITION = 450
DEMO_EVAL_PER_CONDITION = 300


@dataclass(frozen=True)
class RecoveryDefaults:
    """Accuracy-recovery options as plain values (``calibrate --smoothquant``, ``--bias-correction``,
    ``--refine-ranges``; ``workbench.calibration.recovery.RecoveryOptions``)."""

    smoothquant: str | None = None
    bias_correction: bool = False
    refine_ranges: bool = False
    clip_search: bool = False
    shift_scale: bool = False


# The demo's accuracy recovery, used by its calibration and so by its search and sign-off (docs/recovery.md):
# bias correction (no extra calibration pass), the clipping search of the feature encoder's conv inputs (one
# scoring run per conv and candidate threshold on 32 calibration clips), whose long-tailed GELU outputs are what
# breaks INT8 on the demo model. ``demo --shift-scale`` adds the per-channel shift and scale of those inputs: INT8
# everywhere loses less, but the plan its search finds has failed the sign-off (docs/recovery.md#measured).
DEMO_RECOVERY = RecoveryDefaults(bias_correction=True, clip_search=True)
# The recovery of a verb given no recovery option (calibrate, compare, search, signoff: ``--no-recovery`` for none,
# ``--no-bias-correction``/``--no-clip-search`` for less) and of a project file that names none (``workbench.project``):
# the demo's, the best measured. The demo's preset names DEMO_RECOVERY itself.
DEFAULT_RECOVERY = DEMO_RECOVERY
# ``workbench run``'s exit status when some deployment target has no candidate besides the FP32 baseline that passes
# every gate (0: every target has one; 1: a user error)
RUN_NOTHING_PASSES = 3


@dataclass(frozen=True)
class SearchConfig:
    """How the mixed-precision search judges a candidate on its dev set (``workbench.search.evaluator``)."""

    # The search keeps the passing candidate with the most INT8, and the sign-off judges it on other speakers
    # and texts: a candidate passes when the sign-off interval its dev interval predicts (widened to the
    # sign-off set's speakers, both ends moved out for a sign-off pass with this probability; see
    # workbench.search.evaluator) is within the gates. A fixed margin of 1/3 of the gate (no shift) lets
    # through a plan whose dev interval is as wide as the gate: such a plan passed the sign-off in one demo
    # run of two (docs/compare-and-search.md).
    confidence: float = 0.9
    # share of each gate held back on top of that (0: none)
    margin: float = 0.0
    # the dev set is bought in this many blocks: a candidate is judged on the first, and more are transcribed
    # only while its judged interval straddles the gate (workbench.search.sequential; 1: the whole set at once)
    dev_blocks: int = 4
    # the fewest utterances a look before the whole dev set judges (a first block also holds every condition)
    min_block: int = 60
    # an earlier look gives a candidate up when the predictive chance that the whole dev set passes it is below
    # this (workbench.search.sequential.pass_chance; 0: never, the default). Off because the demo's blocks are not
    # exchangeable (the first holds one utterance of every speaker, the last the many-utterance speakers): on a
    # 1,058-utterance demo dev set 5 % saved 12 % of the transcriptions and gave up the plan the whole set
    # passes (found 70.9 % of MACs in INT8 instead of 72.3 %); 1 % stopped nothing
    futility: float = 0.0
    # what the search maximises among passing plans: "macs" (INT8 share of multiply-accumulates) or "nodes"
    objective: str = "macs"
    # the order groups go to FP16 in: "damage-per-unit" (the ranking's damage per multiply-accumulate, or per
    # node, of what the objective counts) or "damage" (the sensitivity ranking as it is)
    order: str = "damage-per-unit"
    # how the choice among the plans read on one dev set is accounted for (workbench.search.selection): "as-read",
    # "shrink" (winner's-curse correction) or "confirm" (held-back dev speakers, confirm_share of them)
    selection: str = "as-read"
    confirm_share: float = 0.33
    # what a plan is judged on during the search: "wer" (its WER delta vs FP32 on the labelled dev set) or
    # "disagreement" (its word edit distance to FP32's transcripts on unlabelled dev audio, within a budget;
    # workbench.search.disagreement)
    dev_criterion: str = "wer"


SEARCH = SearchConfig()
SEARCH_DEV_CRITERIA: tuple[str, ...] = ("wer", "disagreement")
SEARCH_OBJECTIVES: tuple[str, ...] = ("macs", "nodes")
SEARCH_SELECTIONS: tuple[str, ...] = ("as-read", "shrink", "confirm")
SEARCH_ORDERS: tuple[str, ...] = ("damage-per-unit", "damage")


# Sign-off: what to do with evaluation clips outside the deployment profile (refuse, score, skip)
OUTSIDE_PROFILE_POLICIES: tuple[str, ...] = ("refuse", "score", "skip")
OUTSIDE_PROFILE_DEFAULT = "refuse"


@dataclass(frozen=True)
class DashboardConfig:
    """The dashboard's own defaults. Streamlit's server settings (address 127.0.0.1, port, XSRF, usage
    statistics) live in ``workbench/dashboard/entry/.streamlit/config.toml``, which Streamlit reads itself."""

    # Run-page jobs running at once (each is a full CLI process: model, ONNX Runtime threads, memory)
    max_jobs: int = 2
    # shortest access token accepted for a shared dashboard (secrets.token_urlsafe(32) gives 43)
    min_token_chars: int = 16


DASHBOARD = DashboardConfig()


# Where numbers are produced (--backend) and where the candidate will run (--target). A verdict picks a
# winner by latency only when latency was measured on the target; otherwise it is an accuracy sign-off.
BACKENDS: tuple[str, ...] = ("ort-cpu", "ort-cuda", "tensorrt")
DEFAULT_BACKEND = "ort-cpu"
DEFAULT_TARGET = "tensorrt"

# Evaluation batches (--batch-size): clips of similar length share a batch (workbench.evaluate.batching). Batch 1 on
# the CPU, where batching buys no speed (batched_eval_ort_cpu.json: batch 8 at 0.95x the speed of batch 1), larger
# on a GPU; a TensorRT engine's profile caps it. A model without an attention mask batches equal lengths only.
EVAL_BATCH_BY_BACKEND: dict[str, int] = {"ort-cpu": 1, "ort-cuda": 32, "tensorrt": 32}
DEFAULT_EVAL_BATCH = 1
# zero padding allowed in a batch of a model without an attention mask, as a share of its longest clip, when the
# deployment pads (--pad-batches); without it such a model batches equal lengths only (padding changes its outputs)
EVAL_MAX_PADDING = 0.1
# utterances transcribed again at batch 1 to check the batched transcripts (transcripts that differ, WER change)
BATCH_CHECK_UTTERANCES = 48
# The calibration method when none is given: the best measured on the demo model, percentile 99.99 (INT8 everywhere
# +0.93 WER points [+0.16, +2.24], the searched plan 75.9 % INT8; TensorRT's entropy +4.13 [+2.83, +5.41] and 46.6 %:
# benchmarks/results/calibration_methods.json, calibration_methods_entropy_reference.json; docs/calibration.md).
# With DEFAULT_RECOVERY it is the default recipe of the verbs and of a project file (``workbench run``).
DEFAULT_METHOD = "percentile"
DEFAULT_PERCENTILE = 99.99


@dataclass(frozen=True)
class VerdictConfig:
    """How latency differences are judged: a percentile-bootstrap interval (``level``, ``resamples``,
    ``seed``) on each candidate's latency ratio to the baseline over paired interleaved rounds."""

    level: float = 0.95
    resamples: int = 2000
    seed: int = 0


VERDICT = VerdictConfig()

# an inconclusive error-rate gate whose settling evidence would be more than this many times the evaluation set
# says "more data will not settle this" (its estimate sits at the limit) instead of an utterance count
EVIDENCE_MAX_FACTOR = 20.0


@dataclass(frozen=True)
class EvidenceConfig:
    """The least evidence a PASS needs (``workbench.evaluate.evidence``): per judged group (overall and each
    condition) at least ``min_speakers`` speakers and ``min_reference_words`` reference words (characters for CER).

    Speakers: the paired interval resamples whole speakers, so speakers are its sample size. With n speakers the
    bootstrap sees at most C(2n-1, n) distinct resamples (462 at 6 speakers, 92,378 at 10) and its 2.5 % tail rests
    on a dozen of them at 6; a speaker whose transcripts did not change sits out of about (1 - 1/n)^n = a third of
    the resamples whatever n is, so with few speakers that changed anything one end of the interval lands on 0.00
    (a 20-utterance, 6-speaker set read INT8 everywhere at -1.10 [-2.02, 0.00] after the dev set had read +2.87).
    Cluster bootstraps are known to cover too little below about ten clusters, so ten is a floor, not a guarantee.
    Words: at 300 reference words one changed word moves the delta by 0.33 points, a third of the 1-point condition
    gate; with fewer, one or two words decide the condition gate and a single word outweighs the 0.3-point overall
    gate."""

    min_speakers: int = 10
    min_reference_words: int = 300


EVIDENCE = EvidenceConfig()

# fewest bootstrap resamples sign-off and search accept (fewer give no usable percentile interval)
MIN_RESAMPLES = 100


@dataclass(frozen=True)
class OptionLimits:
    """Bounds of numeric options beyond their natural domain (``workbench/values.py``): the longest audio length
    an option may name (a day: anything longer is a typo), and the shortest chunk (25 frames of 20 ms: below it
    a chunk holds no word)."""

    max_seconds: float = 86_400.0
    min_chunk_seconds: float = 0.5


OPTION_LIMITS = OptionLimits()


@dataclass(frozen=True)
class ConvergenceConfig:
    """When ``calibrate`` calls a run converged (``workbench/calibration/convergence.py``)."""

    # a tensor still moves when its range grew by more than grow_steps INT8 steps (amax / 127) over the last
    # part of the clips (the earlier range would clip the later clips by that much) or shrank by more than
    # shrink_steps (steps only get finer: 6 steps = 0.42 dB of rounding SQNR); chosen with the demo's
    # readings in docs/calibration.md (benchmarks/results/calibration_convergence.json)
    grow_steps: float = 2.0
    shrink_steps: float = 6.0
    last_fraction: float = 0.25  # the last quarter of the clips
    min_clips: int = 4  # fewer clips: convergence is not recorded
    shown: int = 5  # moving tensors listed by calibrate


CONVERGENCE = ConvergenceConfig()


@dataclass(frozen=True)
class Fp16GuardConfig:
    """When the FP16 guard keeps a node in FP32 (``workbench.quantize.guard``)."""

    # a tensor whose calibrated |x| exceeds 65504 / headroom is kept FP32: calibration clips are a sample,
    # deployed audio can be louder; 4 leaves two binades of room
    headroom: float = 4.0
    # sums over the time axis (GroupNorm over frames, pooling) grow with the clip: projected to this length
    max_clip_seconds: float = 30.0
    # a Softmax whose input reaches |x| where FP16's step exceeds this is kept FP32 with its input's writer:
    # at step 1/8 (|x| >= 128) rounding alone moves a probability by up to 6 %
    softmax_input_step: float = 1.0 / 16.0
    # the overflow check before sign-off: outputs on every calibration clip, every tensor on this many (the
    # longest half, where sums are largest, the rest spread over the set) and on any whose output held inf/NaN
    overflow_every_tensor_clips: int = 16


FP16_GUARD = Fp16GuardConfig()


@dataclass(frozen=True)
class InferenceDefaults:
    """Beam-search defaults (``workbench/evaluate/inference.py``): pyctcdecode's width and LM weights, which the
    flashlight-text beam keeps (``workbench/evaluate/word_scorer.py``: the same alpha and beta mean the same)."""

    beam_width: int = 100
    alpha: float = 0.5  # language model weight
    beta: float = 1.0  # word insertion bonus
    hotword_weight: float = 10.0
    samples_per_frame: int = 320  # Wav2Vec2-family conv strides 5*2^6, when the model's config is not at hand


INFERENCE = InferenceDefaults()

# --ray (workbench.cluster): the check set every worker runs before its shards (the first clips of the job's set
# through the reference model; a worker whose logits differ from this machine's by more than the tolerance is
# refused), shards per worker (smaller shards balance better and lose less to a lost worker) and how to install Ray.
RAY_CHECK_CLIPS = 2
RAY_CHECK_ATOL = 1e-4
RAY_SHARDS_PER_WORKER = 2
RAY_START_TIMEOUT_S = 120.0  # workers not placed by then (a cluster busy with other work) are left out
RAY_VERSION = "2.60.0"
RAY_INSTALL_HINT = f"pip install 'ray=={RAY_VERSION}' (or the workbench's extra: pip install -e '.[ray]')"


@dataclass(frozen=True)
class ServingDefaults:
    """The serving benchmark's settings when the gate file's ``[serving]`` table leaves them out
    (``workbench.serving``): a dynamic batcher like Triton's in front of the model, an open-loop Poisson load."""

    max_batch: int = 8  # largest batch the batcher forms
    max_queue_delay_ms: float = 5.0  # how long the oldest request may wait for a batch to fill
    instances: int = 1  # model instances (sessions) serving in parallel
    seconds_per_rate: float = 4.0  # each offered load runs this long (arrivals), then drains
    min_requests: int = 10  # ... or longer, until this many requests are expected at its rate
    budget_s: float = 60.0  # wall-clock budget of one candidate's sweep; the sweep stops when spent
    max_rates: int = 8  # offered loads per sweep at most
    # automatic sweep: these multiples of the instances' batch-1 throughput (1 / single-request latency)
    rate_factors: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
    # below the grid: halve the lowest load up to this many times when even it misses the target
    descend_halvings: int = 5
    # above the capacity: bisect towards the first load that misses this many times (geometric midpoints) ...
    refine_steps: int = 3
    resolution: float = 0.1  # ... while that gap is wider than this share of the capacity
    max_offered_qps: float = 2000.0  # above this a Python load generator cannot keep its schedule
    max_lag_ms: float = 20.0  # a load whose releases fall further behind schedule (p99) was not generated
    seed: int = 0


SERVING = ServingDefaults()


@dataclass(frozen=True)
class CoverageRule:
    """When a calibrated tensor has left its range on new audio (``workbench.calibration.coverage``): its share of
    values beyond the calibrated amax there is at least ``min_share`` and ``factor`` times its share on the
    calibration set. ``shown``: the tensors that moved most, listed in the record."""

    factor: float = 3.0
    min_share: float = 1e-3  # 0.1 % of the tensor's values: ten times what percentile 99.99 leaves out
    shown: int = 10


@dataclass(frozen=True)
class LabelFreeDefaults:
    """The sign-off's label-free check (``signoff --unlabelled-set``, ``workbench.jobs.label_free``)."""

    # calibration clips the reference shares are counted on (spread over the set)
    coverage_calib_clips: int = 64
    coverage: CoverageRule = field(default_factory=CoverageRule)
    # a note says FP32 itself is less sure on the audio when its mean max posterior there is this much below the
    # evaluation set's
    confidence_drop: float = 0.05
    # the shift check flags a candidate when the lower end of the interval (the sign-off's level) of its disagreement
    # on the unlabelled audio minus its disagreement on the labelled evaluation set, each set's speakers resampled on
    # their own, is above this margin (a fraction of FP32's words). 1 point: on the demo model
    # (benchmarks/results/label_free_large.json, 240 evaluation clips, 5 draws of the same population with
    # `data build --draw`) the mixed plan's difference on every fresh draw has its lower end above 0 (0.12-0.52
    # points: 5 of 5 false alarms at margin 0, 2 at 0.5), none above 1; INT8 everywhere on the shifted audio is
    # +16.46 [+9.02, +24.97] and still flags, the mixed plan there (+2.34 [+0.50, +4.73], WER delta -0.31) does not
    shift_margin: float = 0.01
    # ... and 0 where the labelled evaluation set has at least ``large_eval_clips`` clips: at the demo's sizes
    # (benchmarks/results/label_free_demo_scale.json, 900 evaluation clips, 5 draws) every draw's difference
    # contains 0 for both candidates (0 false alarms of 5 at margin 0) and margin 0 flags the mixed plan the
    # labelled sign-off passes on the shifted audio (+2.36 [+0.39, +4.73]), which 1 point misses. 600 lies between
    # the two measured sizes (240: 5 false alarms of 5 at margin 0; 900: none); it is not itself measured.
    shift_margin_large: float = 0.0
    large_eval_clips: int = 600

    def default_shift_margin(self, eval_clips: int) -> float:
        """The shift check's margin when the gate file sets none, for a labelled evaluation set of this size."""
        return self.shift_margin_large if eval_clips >= self.large_eval_clips else self.shift_margin


LABEL_FREE = LabelFreeDefaults()

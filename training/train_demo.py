"""Train the demo Wav2Vec2ForCTC from scratch with CTC on the workbench's synthetic speech.

Resumable and time-boxed, so training can span several 10-minute runs on the GPU machine:
data and checkpoints live in ``--state-dir``; each run trains until ``--deadline-s`` and then
writes the Hugging Face model folder to ``--out-dir``. The learning-rate schedule follows the
cumulative training time (warm-up, then cosine decay to ``total_train_s``).
Augmentation on the fly, as in the quiet/noisy conditions: speech level (16-bit quantised),
a quiet noise floor (30-45 dB SNR) or white/pink/brown/hum/babble noise at 0-20 dB SNR.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from training.channels import reverberate, speed_perturb, telephone_band
from training.longform import (
    Item,
    LongFormRecipe,
    item_audio,
    item_text,
    make_items,
    single,
    validation_items,
)
from training.synth_data import DataSpec, generate
from workbench.model.vocab import VOCAB, decode_ids, encode_text

T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def load_data(
    state: Path, cfg: dict, workers: int, split: str, count: int, seed: int, budget_s: float | None = None
) -> dict:
    d = cfg["data"]
    catalogue = d.get("catalogue", "workbench")
    tag = "" if catalogue == "workbench" else f"_{catalogue}"
    path = state / f"data{tag}_{split}_{count}_{seed}.npz"
    if path.exists():
        z = np.load(path, allow_pickle=True)
        return {k: z[k] for k in z.files}
    spec = DataSpec(
        count,
        split,
        seed,
        d["majority_accent_share"],
        tuple(d["rate_range"]),
        tuple(d["pitch_range"]),
        d["max_seconds"],
        catalogue=catalogue,
        texts_file=str(d.get("texts_file", "")),
        pool_shares=tuple(
            d.get("val_pool_shares", d.get("pool_shares", (0.45, 0.2, 0.35)))
            if split != "train"
            else d.get("pool_shares", (0.45, 0.2, 0.35))
        ),
    )
    data = generate(spec, workers, budget_s)
    data["texts"] = np.array(data["texts"], dtype=object)
    data["speakers"] = np.array(data["speakers"], dtype=object)
    np.savez(path, **data)
    return data


def make_batches(
    lengths: np.ndarray, batch_samples: int, max_batch: int, rng: np.random.Generator
) -> list[np.ndarray]:
    order = np.argsort(lengths + rng.uniform(0, 4000, len(lengths)))
    batches, current = [], []
    for idx in order:
        longest = max([lengths[i] for i in current] + [lengths[idx]])
        if current and (longest * (len(current) + 1) > batch_samples or len(current) >= max_batch):
            batches.append(np.array(current))
            current = []
        current.append(idx)
    if current:
        batches.append(np.array(current))
    rng.shuffle(batches)
    return batches


def collate(
    data: dict, items: list[Item], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """A padded batch of items (single clips or joined long ones), their lengths and reference texts."""
    waves = [item_audio(data["audio"], data["offsets"], item) for item in items]
    lens = [len(w) for w in waves]
    x = np.zeros((len(items), max(lens)), dtype=np.float32)
    for row, wave in enumerate(waves):
        x[row, : lens[row]] = wave
    return (
        torch.from_numpy(x).to(device),
        torch.tensor(lens, device=device),
        [item_text(data["texts"], item) for item in items],
    )


def coloured(shape: tuple[int, int], exponent: torch.Tensor, device: torch.device) -> torch.Tensor:
    white = torch.randn(shape, device=device)
    spec = torch.fft.rfft(white, dim=1)
    freqs = torch.fft.rfftfreq(shape[1], d=1 / 16000, device=device).clamp_min(16000 / shape[1])
    spec = spec / freqs[None, :] ** (exponent[:, None] / 2)
    spec[:, 0] = 0
    return torch.fft.irfft(spec, n=shape[1], dim=1)


def augment(x: torch.Tensor, lens: torch.Tensor, aug: dict, gen: torch.Generator) -> torch.Tensor:
    """Reverberation, then level + noise per utterance (vectorised), telephone band, normalisation."""
    b, t = x.shape
    dev = x.device
    if aug.get("reverb_share", 0.0) > 0:
        x = reverberate(x, lens, torch.rand(b, device=dev) < aug["reverb_share"], tuple(aug["rt60_s"]))
    mask = (torch.arange(t, device=dev)[None, :] < lens[:, None]).float()
    u = lambda lo, hi: torch.empty(b, device=dev).uniform_(lo, hi)  # noqa: E731
    noisy = torch.rand(b, device=dev) < aug["noisy_share"]
    kind = torch.randint(0, 5, (b,), device=dev)  # 0 white 1 pink 2 brown 3 hum 4 babble
    kind = torch.where(noisy, kind, torch.ones_like(kind))  # quiet floor: pink
    snr = torch.where(noisy, u(*aug["noisy_snr_db"]), u(*aug["quiet_snr_db"]))
    exponent = torch.where(kind == 2, 2.0, torch.where(kind == 1, 1.0, 0.0)).to(dev)
    noise = coloured((b, t), exponent, dev)
    tt = torch.arange(t, device=dev)[None, :] / 16000
    base = torch.where(torch.rand(b, device=dev) < 0.5, 50.0, 60.0)[:, None]
    hum = sum((0.6**k) * torch.sin(2 * math.pi * base * (k + 1) * tt + u(0, 6.28)[:, None]) for k in range(5))
    noise = torch.where((kind == 3)[:, None], hum + 0.01 * torch.randn_like(hum), noise)
    if b > 1:
        bab = sum(
            torch.roll(torch.roll(x, s, dims=0), int(torch.randint(0, t, (1,))), dims=1) for s in (1, 2, 3)
        )
        noise = torch.where((kind == 4)[:, None], bab, noise)
    noise = noise * mask
    p_s = (x**2).sum(1) / lens
    p_n = (noise**2).sum(1) / lens + 1e-10
    noise = noise * torch.sqrt(p_s / (p_n * 10 ** (snr / 10)))[:, None]
    level = u(*aug["level_dbfs"])
    y = x + noise
    if aug.get("telephone_share", 0.0) > 0:
        y = telephone_band(y, lens, torch.rand(b, device=dev) < aug["telephone_share"])
    rms = torch.sqrt((y**2).sum(1) / lens + 1e-10)
    y = y * (10 ** (level / 20) / rms)[:, None]
    y = torch.round(y.clamp(-1, 1) * 32767) / 32767 * mask
    return normalise_padded(y, lens, mask)


def normalise_padded(y: torch.Tensor, lens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    mean = (y * mask).sum(1) / lens
    var = (((y - mean[:, None]) * mask) ** 2).sum(1) / lens
    return (y - mean[:, None]) / torch.sqrt(var[:, None] + 1e-7) * mask


def lr_at(elapsed: float, tcfg: dict) -> float:
    """Warm-up, then cosine decay to 5 % of the peak at ``total_train_s``; the schedule begins at
    ``schedule_start_s`` of cumulative training (0: the first stage; a later stage restarts it there)."""
    start = tcfg.get("schedule_start_s", 0.0)
    elapsed, total = elapsed - start, tcfg["total_train_s"] - start
    if elapsed < tcfg["warmup_s"]:
        return tcfg["peak_lr"] * max(elapsed, 1.0) / tcfg["warmup_s"]
    frac = min(1.0, (elapsed - tcfg["warmup_s"]) / max(1.0, total - tcfg["warmup_s"]))
    return tcfg["peak_lr"] * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))


def wer_cer(refs: list[str], hyps: list[str]) -> tuple[float, float]:
    def ed(a, b):
        prev = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            cur = [i]
            for j, cb in enumerate(b, 1):
                cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
            prev = cur
        return prev[-1]

    we = sum(ed(r.split(), h.split()) for r, h in zip(refs, hyps)) / max(1, sum(len(r.split()) for r in refs))
    ce = sum(ed(r, h) for r, h in zip(refs, hyps)) / max(1, sum(len(r) for r in refs))
    return we, ce


@torch.no_grad()
def validate(
    model, data: dict, device: torch.device, items: list[Item] | None = None
) -> tuple[float, float, list[tuple[str, str]]]:
    """Greedy WER and CER over ``items`` (default: every validation utterance alone), 32 to a batch by length."""
    model.eval()
    lengths = np.diff(data["offsets"])
    items = items if items is not None else [single(i) for i in range(len(lengths))]
    item_lengths = np.array([item.samples(lengths) for item in items])
    per_batch = 32 if item_lengths.max() <= 10 * 16000 else 8
    refs, hyps = [], []
    for idx in np.array_split(np.argsort(item_lengths), max(1, len(items) // per_batch)):
        x, lens, texts = collate(data, [items[i] for i in idx], device)
        mask = (torch.arange(x.shape[1], device=device)[None, :] < lens[:, None]).float()
        logits = model(normalise_padded(x, lens, mask)).logits
        out_lens = model._get_feat_extract_output_lengths(lens)
        for row in range(len(idx)):
            hyps.append(decode_ids(logits[row, : out_lens[row]].argmax(-1).tolist()))
            refs.append(texts[row])
    model.train()
    w, c = wer_cer(refs, hyps)
    return w, c, list(zip(refs, hyps))[:3]


def validation_record(
    model, val: dict, device: torch.device, val_long: list[Item] | None, step: int, elapsed: float
) -> tuple[dict, str, list[tuple[str, str]]]:
    """One validation: the history record (WER, CER and, with long items, the long-form WER), its log text and
    examples."""
    w, c, ex = validate(model, val, device)
    record = {"step": step, "elapsed": elapsed, "val_wer": w, "val_cer": c}
    if val_long is not None:
        record["val_long_wer"] = validate(model, val, device, val_long)[0]
    long_note = f" long {record['val_long_wer']:.3f}" if val_long is not None else ""
    return record, f"WER {w:.3f} CER {c:.3f}{long_note}", ex


def save_hf(model, out: Path, meta: dict) -> None:
    from transformers import Wav2Vec2CTCTokenizer, Wav2Vec2FeatureExtractor, Wav2Vec2Processor

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    (out / "vocab.json").write_text(json.dumps(VOCAB, indent=1))
    tok = Wav2Vec2CTCTokenizer(
        str(out / "vocab.json"),
        unk_token="<unk>",
        pad_token="<pad>",
        word_delimiter_token="|",
        bos_token="<s>",
        eos_token="</s>",
    )
    fe = Wav2Vec2FeatureExtractor(
        feature_size=1, sampling_rate=16000, padding_value=0.0, do_normalize=True, return_attention_mask=False
    )
    Wav2Vec2Processor(feature_extractor=fe, tokenizer=tok).save_pretrained(out)
    fe.save_pretrained(out)  # preprocessor_config.json, read by every transformers version
    tok.save_pretrained(out)
    (out / "training_meta.json").write_text(json.dumps(meta, indent=2))


def save_checkpoint(
    path: Path, model, opt, step: int, elapsed: float, epoch: int, history: list[dict]
) -> None:
    """What a later call resumes from: weights, optimiser, step, training seconds, epoch and validation history."""
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "step": step,
            "elapsed": elapsed,
            "epoch": epoch,
            "history": history,
        },
        path,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", type=Path, default=Path(__file__).with_name("config.json"))
    ap.add_argument("--state-dir", type=Path, required=True)
    ap.add_argument("--out-dir", type=Path, required=True)
    ap.add_argument("--deadline-s", type=float, default=540)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--train-utterances", type=int)
    ap.add_argument("--data-seed", type=int, help="seed of the synthetic training data (default: train seed)")
    ap.add_argument(
        "--init-from", type=Path, help="start from this HF model folder (fresh optimiser) when no checkpoint"
    )
    ap.add_argument("--total-train-s", type=float, help="override the schedule's total training seconds")
    ap.add_argument(
        "--texts", type=Path, help="training texts, one per line (python -m training.corpus --out FILE)"
    )
    ap.add_argument(
        "--synth-budget-s", type=float, help="stop synthesising training data after this many seconds"
    )
    args = ap.parse_args()
    cfg = json.loads(args.config.read_text())
    tcfg, dcfg = cfg["train"], cfg["data"]
    args.state_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(tcfg["seed"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    if args.total_train_s:
        tcfg["total_train_s"] = args.total_train_s
    n_train = args.train_utterances or dcfg["train_utterances"]
    data_seed = tcfg["seed"] if args.data_seed is None else args.data_seed
    if args.texts:
        dcfg["texts_file"] = str(args.texts)
    train = load_data(args.state_dir, cfg, args.workers, "train", n_train, data_seed, args.synth_budget_s)
    val = load_data(args.state_dir, cfg, args.workers, "eval", dcfg["val_utterances"], tcfg["seed"] + 1)
    lengths = np.diff(train["offsets"])
    log(f"data: {len(lengths)} train utts ({lengths.sum() / 16000 / 3600:.2f} h), {len(val['texts'])} val")
    recipe = LongFormRecipe.from_config(dcfg)
    val_lengths = np.diff(val["offsets"])
    val_long = validation_items(len(val_lengths), val_lengths) if recipe.share > 0 else None

    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    model = Wav2Vec2ForCTC(Wav2Vec2Config(**cfg["model"])).to(device)
    opt = torch.optim.AdamW(
        model.parameters(), lr=tcfg["peak_lr"], weight_decay=tcfg["weight_decay"], betas=(0.9, 0.98), eps=1e-6
    )
    ckpt = args.state_dir / "ckpt.pt"
    step, elapsed, epoch = 0, 0.0, 0
    # every validation of the run, kept across resumed calls (in the checkpoint and the model's training meta)
    history: list[dict] = []
    if ckpt.exists():
        state = torch.load(ckpt, map_location=device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step, elapsed, epoch = state["step"], state["elapsed"], state["epoch"]
        history = list(state.get("history", []))
        log(f"resumed at step {step}, {elapsed:.0f}s trained")
    elif args.init_from:
        from safetensors.torch import load_file

        model.load_state_dict(load_file(str(args.init_from / "model.safetensors")))
        meta0 = json.loads((args.init_from / "training_meta.json").read_text())
        step, elapsed = meta0["steps"], meta0["train_seconds"]
        history = list(meta0.get("history", []))
        log(f"initialised from {args.init_from} (step {step}, {elapsed:.0f}s trained); fresh optimiser")
    rewarm_from = elapsed if (args.init_from and not ckpt.exists()) else None
    model.train()
    gen = torch.Generator(device=device)
    last_ckpt = last_val = time.time()
    done = False
    while not done:
        rng = np.random.default_rng(tcfg["seed"] * 1000 + epoch)
        items = make_items(train["speakers"], lengths, recipe, rng)
        item_lengths = np.array([item.samples(lengths) for item in items])
        for idx in make_batches(item_lengths, int(tcfg["batch_seconds"] * 16000), tcfg["max_batch"], rng):
            if time.time() - T0 > args.deadline_s or elapsed >= tcfg["total_train_s"]:
                done = True
                break
            t_step = time.time()
            x, lens, texts = collate(train, [items[i] for i in idx], device)
            if dcfg.get("speed_share", 0.0) > 0 and float(torch.rand(1)) < dcfg["speed_share"]:
                x, lens = speed_perturb(x, lens, float(torch.empty(1).uniform_(*dcfg["speed_range"])))
            x = augment(x, lens, dcfg, gen)
            labels = [torch.tensor(encode_text(t)) for t in texts]
            target_lens = torch.tensor([len(l) for l in labels], device=device)
            targets = torch.cat(labels).to(device)
            scale = 1.0 if rewarm_from is None else min(1.0, max(0.02, (elapsed - rewarm_from) / 20.0))
            for g in opt.param_groups:
                g["lr"] = lr_at(elapsed, tcfg) * scale
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda"):
                logits = model(x).logits
            out_lens = model._get_feat_extract_output_lengths(lens).clamp(max=logits.shape[1])
            logp = F.log_softmax(logits.float(), -1).transpose(0, 1)
            loss = F.ctc_loss(logp, targets, out_lens, target_lens, blank=0, zero_infinity=True)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg["grad_clip"])
            opt.step()
            step += 1
            if device.type == "cuda":
                torch.cuda.synchronize()
            elapsed += time.time() - t_step
            if step % 100 == 0:
                log(
                    f"step {step} loss {loss.item():.3f} lr {lr_at(elapsed, tcfg):.2e} trained {elapsed:.0f}s batch {len(idx)}"
                )
            if time.time() - last_val > 120:
                record, text, ex = validation_record(model, val, device, val_long, step, elapsed)
                history.append(record)
                log(f"VAL step {step}: {text} e.g. {ex[0]}")
                last_val = time.time()
            if time.time() - last_ckpt > 90:
                save_checkpoint(ckpt, model, opt, step, elapsed, epoch, history)
                last_ckpt = time.time()
        else:
            epoch += 1
    final, text, ex = validation_record(model, val, device, val_long, step, elapsed)
    history.append({**final, "end_of_call": True})
    w, c = final["val_wer"], final["val_cer"]
    log(f"FINAL step {step}: val {text}; examples {ex}")
    save_checkpoint(ckpt, model, opt, step, elapsed, epoch, history)
    meta = {
        "steps": step,
        "train_seconds": elapsed,
        "epochs": epoch,
        "train_utterances": int(len(lengths)),
        "train_hours": float(lengths.sum() / 16000 / 3600),
        "val_wer": w,
        "val_cer": c,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "history": history,
        "train_speakers": sorted(set(map(str, train["speakers"]))),
    }
    save_hf(model.float().cpu(), args.out_dir, meta)
    log(f"saved to {args.out_dir}")


if __name__ == "__main__":
    main()

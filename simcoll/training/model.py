"""What a training step computes: layers with their parameter tensors and FLOPs, the bytes
kept per parameter, and the GPUs that run them.

Parameter counts (GPT, Narayanan et al. 2021, "Efficient large-scale language model
training on GPU clusters using Megatron-LM", Sec. 5.1 / Appendix): a transformer block
has 12 h^2 + 13 h parameters (QKV 3h^2 + 3h, projection h^2 + h, MLP 8h^2 + 5h, two
layer norms 4h) and the embeddings (V + s) h, so the model has
P = 12 l h^2 (1 + 13 / (12 h) + (V + s) / (12 l h)). The final layer norm (2h) is not in
that formula and is left out here too.

FLOPs (same paper): a block's forward pass is 24 B s h^2 + 4 B s^2 h (matrix
multiplications 24 B s h^2; attention scores and their product with the values
4 B s^2 h) and the logit layer's 2 B s h V; the backward pass costs twice the forward.
Forward + backward is then 72 B s l h^2 (1 + s / (6h) + V / (12 l h)): the model FLOPs
that MFU counts (Korthikanti et al. 2022, "Reducing activation recomputation in large
transformer models", Sec. 6; Chowdhery et al. 2022, PaLM, App. B), about 6 N tokens
(Kaplan et al. 2020, "Scaling laws for neural language models", Sec. 2.1). With full
activation recomputation one more forward pass is run, which gives Narayanan et al.'s
eq. (3), 96 B s l h^2 (1 + s / (6h) + V / (16 l h)) FLOPs actually executed.

Bytes per parameter (Rajbhandari et al. 2020, "ZeRO: memory optimizations toward training
trillion parameter models", Sec. 3.1): mixed-precision Adam keeps fp16 parameters (2 B)
and gradients (2 B) and K = 12 B of optimizer state (fp32 parameters, momentum and
variance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from simcoll.checks import flag, integer, real
from simcoll.errors import InvalidInputError

__all__ = ["GPU", "A100", "H100", "Precision", "MIXED_PRECISION_ADAM", "Layer", "Model",
           "gpt", "llama", "gpt2_1_5b", "llama_7b", "llama_70b", "split_blocks",
           "per_layer_seconds"]


@dataclass(frozen=True)
class GPU:
    """A GPU's arithmetic rate and memory.

    Attributes:
        name: what it is called.
        peak_flops: dense FLOP/s in the training precision (the MFU denominator).
        efficiency: the fraction of the peak that the layers reach (compute time is
            FLOPs / (peak_flops x efficiency)).
        memory: bytes of device memory (None: not said), what a step's model states and
            activations must fit in (``Step.fits``).
    """

    name: str
    peak_flops: float
    efficiency: float = 1.0
    memory: float | None = None

    def __post_init__(self) -> None:
        # kept as Python floats: a numpy float32 peak gave float32 step times
        peak = real(self.peak_flops, "peak_flops", strict=True, what="FLOP/s")
        object.__setattr__(self, "peak_flops", peak)
        if self.memory is not None:
            memory = real(self.memory, "memory", strict=True, what="bytes of device memory")
            object.__setattr__(self, "memory", memory)
        eff = real(self.efficiency, "efficiency", strict=True, what="fraction of the peak")
        object.__setattr__(self, "efficiency", eff)
        if eff > 1:
            raise InvalidInputError(f"efficiency={eff!r} is not accepted; use a fraction "
                                    f"of the peak in (0, 1]")

    @property
    def flops_per_second(self) -> float:
        """The rate the layers run at, FLOP/s."""
        return self.peak_flops * self.efficiency

    def seconds(self, flops: float) -> float:
        """How long ``flops`` take on this GPU."""
        return flops / self.flops_per_second


#: NVIDIA A100 SXM datasheet: 312 TFLOP/s dense FP16 / BF16 tensor-core; 80 GB of HBM2e
#: (81,920 MiB as nvidia-smi shows it).
A100 = GPU("A100", 312e12, memory=80 * 2**30)
#: NVIDIA H100 SXM datasheet: 989 TFLOP/s dense BF16 tensor-core (1979 with sparsity); 80
#: GB of HBM3 (81,559 MiB as nvidia-smi shows it: some is reserved).
H100 = GPU("H100", 989e12, memory=81_559 * 2**20)


@dataclass(frozen=True)
class Precision:
    """Bytes kept per parameter: its weights, its gradient and its optimizer state (K),
    and bytes per activation element."""

    param_bytes: int = 2
    grad_bytes: int = 2
    optimizer_bytes: int = 12
    activation_bytes: int = 2

    def __post_init__(self) -> None:
        for name in ("param_bytes", "grad_bytes", "optimizer_bytes", "activation_bytes"):
            value = integer(getattr(self, name), name, minimum=0, what="bytes")
            object.__setattr__(self, name, value)


#: Mixed-precision Adam as in ZeRO: fp16 parameters and gradients, K = 12.
MIXED_PRECISION_ADAM = Precision()


@dataclass(frozen=True)
class Layer:
    """One layer: its parameter tensors and the FLOPs of its passes over the whole batch.

    Attributes:
        name: e.g. ``"block3"``.
        tensors: element counts of its parameter tensors, in definition order.
        forward_flops, backward_flops: FLOPs of each pass for the model's batch (they
            scale linearly with the number of sequences).
        block: whether it is a transformer block (what tensor parallelism splits and
            what pipeline stages are cut from).
        attention_share: the fraction of a block's FLOPs in its attention half (before
            tensor parallelism's first all-reduce); the MLP half has the rest.
    """

    name: str
    tensors: tuple[int, ...]
    forward_flops: float
    backward_flops: float
    block: bool = False
    attention_share: float = 0.5

    def __post_init__(self) -> None:
        if not isinstance(self.tensors, (tuple, list)):
            raise InvalidInputError(f"tensors={self.tensors!r} is not accepted; give the "
                                    f"element counts of the layer's parameter tensors, "
                                    f"e.g. (4096, 4096)")
        object.__setattr__(self, "tensors", tuple(
            integer(t, f"tensors[{i}]", minimum=1, what="elements")
            for i, t in enumerate(self.tensors)))
        object.__setattr__(self, "block", flag(self.block, "block"))
        for name in ("forward_flops", "backward_flops"):
            object.__setattr__(self, name, real(getattr(self, name), name, what="FLOPs"))
        object.__setattr__(self, "attention_share", real(self.attention_share, "attention_share"))
        if not 0 <= self.attention_share <= 1:
            raise InvalidInputError(f"attention_share={self.attention_share!r} is not "
                                    f"accepted; use a fraction in [0, 1]")

    @property
    def params(self) -> int:
        """Number of parameters."""
        return sum(self.tensors)


@dataclass(frozen=True)
class Model:
    """A model: its layers in forward order and the shape of one iteration.

    Attributes:
        name: e.g. ``"GPT-2 1.5B"``.
        layers: in forward order; transformer blocks are marked ``block``.
        batch: sequences per iteration (the global batch B).
        seq_len, hidden, heads: s, h, a (activation sizes and memory).
        precision: bytes per parameter, gradient, optimizer state and activation.
        kv_heads: g, the key / value heads of grouped-query attention (None: a, one per
            query head); they must divide the heads.
        ffn: f, the MLP's inner width (None: not said, so tensor parallelism does not
            check it).
        tied_embedding: elements of the word embedding the output layer shares (V h for
            :func:`gpt`; 0: none shared). A pipeline of more than one stage keeps a copy
            of it on the last stage, trained as a parameter of its own, whose gradient
            the first and last stages all-reduce (:func:`simcoll.training.step`).
    """

    name: str
    layers: tuple[Layer, ...]
    batch: int
    seq_len: int
    hidden: int
    heads: int
    precision: Precision = field(default=MIXED_PRECISION_ADAM)
    kv_heads: int | None = None
    ffn: int | None = None
    tied_embedding: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.layers, (tuple, list)):
            raise InvalidInputError(f"model {self.name!r}: layers={self.layers!r:.60} is "
                                    f"not accepted; give a tuple or list of Layer")
        if not self.layers:
            raise InvalidInputError(f"model {self.name!r} has no layers; give a tuple of "
                                    f"Layer")
        for i, layer in enumerate(self.layers):
            if not isinstance(layer, Layer):
                raise InvalidInputError(f"layers[{i}]={layer!r} is not accepted; give a "
                                        f"simcoll.training.Layer")
        object.__setattr__(self, "layers", tuple(self.layers))
        if not isinstance(self.precision, Precision):
            raise InvalidInputError(f"precision={self.precision!r} is not accepted; give a "
                                    f"simcoll.training.Precision")
        # kept as Python ints: numpy int32 shapes wrapped (b s h = 2^32 became 0 bytes)
        for name in ("batch", "seq_len", "hidden", "heads"):
            object.__setattr__(self, name, integer(getattr(self, name), name, minimum=1))
        _check_head_split(self.hidden, self.heads)
        if self.kv_heads is not None:
            object.__setattr__(self, "kv_heads", integer(self.kv_heads, "kv_heads", minimum=1))
            if self.heads % self.kv_heads:
                raise InvalidInputError(f"heads={self.heads} is not a multiple of "
                                        f"kv_heads={self.kv_heads}")
        if self.ffn is not None:
            object.__setattr__(self, "ffn", integer(self.ffn, "ffn", minimum=1))
        tied = integer(self.tied_embedding, "tied_embedding", minimum=0, what="elements")
        object.__setattr__(self, "tied_embedding", tied)

    def heads_per_gpu(self, tp: int) -> int:
        """Attention heads each GPU of a tensor-parallel group of ``tp`` holds.

        Megatron-LM splits attention by heads and the MLP by its inner width (Shoeybi et
        al. 2019, Sec. 3), so ``tp`` must divide the heads, the key / value heads and the
        MLP width: Megatron-LM's ``divide`` asserts it for the query groups
        (``megatron/core/transformer/attention.py``: ``divide(num_query_groups,
        world_size)``) and for every column-parallel output
        (``megatron/core/tensor_parallel/layers.py``: ``divide(output_size,
        world_size)``), so each GPU holds params / tp of a block and no key / value head
        is replicated.

        Raises:
            InvalidInputError: ``tp`` is not a count >= 1 or does not divide the heads,
                the key / value heads or the MLP width.
        """
        tp = integer(tp, "tp", minimum=1)
        sizes = [(self.heads, "attention heads"),
                 (self.heads if self.kv_heads is None else self.kv_heads,
                  "key / value heads"),
                 (self.ffn, "MLP width (ffn)")]
        common = math.gcd(*(n for n, _ in sizes if n is not None))
        for n, what in sizes:
            if n is not None and n % tp:
                accepted = ", ".join(map(str, _divisors(common)))
                raise InvalidInputError(f"tp={tp} does not divide the {n} {what} of "
                                        f"{self.name}; use a tp that divides the heads, "
                                        f"the key / value heads and the MLP width: "
                                        f"{accepted}")
        return self.heads // tp

    @property
    def params(self) -> int:
        """Number of parameters (Psi)."""
        return sum(layer.params for layer in self.layers)

    @property
    def blocks(self) -> int:
        """Number of transformer blocks."""
        return sum(layer.block for layer in self.layers)

    @property
    def forward_flops(self) -> float:
        """FLOPs of one forward pass over the batch."""
        return sum(layer.forward_flops for layer in self.layers)

    @property
    def flops(self) -> float:
        """Model FLOPs of one iteration (forward + backward, no recomputation)."""
        return sum(layer.forward_flops + layer.backward_flops for layer in self.layers)

    def with_batch(self, batch: int) -> Model:
        """The same model over ``batch`` sequences (FLOPs scaled accordingly)."""
        batch = integer(batch, "batch", minimum=1)
        scale = batch / self.batch
        layers = tuple(replace(x, forward_flops=x.forward_flops * scale,
                               backward_flops=x.backward_flops * scale)
                       for x in self.layers)
        return replace(self, layers=layers, batch=batch)

    def activation_bytes(self, sequences: int) -> int:
        """Bytes of one block's output for ``sequences`` sequences: b s h elements (what a
        pipeline stage sends, and what tensor parallelism all-reduces)."""
        sequences = integer(sequences, "sequences", minimum=0)
        return sequences * self.seq_len * self.hidden * self.precision.activation_bytes

    def block_activation_memory(self, sequences: int, *, tp: int = 1,
                                sequence_parallel: bool = False,
                                recompute: bool = False) -> float:
        """Bytes one transformer block keeps for its backward pass.

        Korthikanti et al. 2022, eq. 1-4, for 16-bit activations (e = 2 bytes each, and
        a byte per dropout mask element): s b h (34 + 5 a s / h) without parallelism;
        s b h (10 + 24 / t + 5 a s / (h t)) with t-way tensor parallelism;
        s b h / t (34 + 5 a s / h) with sequence parallelism as well; with full
        recomputation only the block's input, 2 s b h (divided by t with sequence
        parallelism). The same count with ``precision.activation_bytes`` = e: 34 is
        16 e + 2 (16 s b h elements kept, two s b h dropout masks), 10 is 4 e + 2, 24 is
        12 e, 5 is 2 e + 1 (two a s^2 b tensors and one mask), and the recomputed input
        e s b h. Derived for GPT blocks; an estimate for other shapes.
        """
        sequences = integer(sequences, "sequences", minimum=0)
        tp = integer(tp, "tp", minimum=1)
        s, h, a = self.seq_len, self.hidden, self.heads
        e = self.precision.activation_bytes
        sbh = s * sequences * h
        if recompute:
            return e * sbh / (tp if sequence_parallel else 1)
        if sequence_parallel:
            return sbh / tp * (16 * e + 2 + (2 * e + 1) * a * s / h)
        return sbh * (4 * e + 2 + 12 * e / tp + (2 * e + 1) * a * s / (h * tp))


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` >= 1, in increasing order."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def _check_head_split(hidden: int, heads: int) -> None:
    """Refuse a hidden size that the attention heads do not split evenly."""
    if hidden % heads:
        raise InvalidInputError(f"hidden={hidden} is not a multiple of heads={heads}")


MAX_LAYERS = 10_000
"""The most blocks a model may have: far beyond any trained (hundreds); a model holds an
object per block, and a typo of 2**70 built them until memory ran out."""


def _shape(layers: int, hidden: int, heads: int, seq_len: int, vocab: int,
           batch: int) -> tuple[int, int, int, int, int, int]:
    checked = tuple(integer(v, name, minimum=1, maximum=most) for v, name, most in (
        (layers, "layers", MAX_LAYERS), (hidden, "hidden", None), (heads, "heads", None),
        (seq_len, "seq_len", None), (vocab, "vocab", None), (batch, "batch", None)))
    _check_head_split(checked[1], checked[2])  # before the layers divide by it
    return checked  # type: ignore[return-value]


def gpt(layers: int, hidden: int, heads: int, seq_len: int, vocab: int, batch: int = 1, *,
        name: str | None = None, precision: Precision = MIXED_PRECISION_ADAM) -> Model:
    """A GPT (GPT-2 / Megatron-LM) model: embeddings, ``layers`` blocks, logits tied to
    the word embedding (``tied_embedding``: V h).

    Parameters 12 l h^2 (1 + 13 / (12 h) + (V + s) / (12 l h)) and forward + backward
    FLOPs 72 B s l h^2 (1 + s / (6h) + V / (12 l h)) (Narayanan et al. 2021; see the
    module docstring).

    Args:
        layers, hidden, heads, seq_len, vocab: l, h, a, s, V.
        batch: sequences per iteration, B.

    Raises:
        InvalidInputError: a size below 1, or ``hidden`` not a multiple of ``heads``.
    """
    n, h, a, s, v, b = _shape(layers, hidden, heads, seq_len, vocab, batch)
    fwd = 24 * b * s * h * h + 4 * b * s * s * h
    attention = (8 * b * s * h * h + 4 * b * s * s * h) / fwd
    block = (3 * h * h, 3 * h, h * h, h, h, h, 4 * h * h, 4 * h, 4 * h * h, h, h, h)
    logits = 2 * b * s * h * v
    return Model(
        name or f"GPT l={n} h={h}",
        (Layer("embedding", (v * h, s * h), 0.0, 0.0),
         *(Layer(f"block{i}", block, fwd, 2 * fwd, block=True, attention_share=attention)
           for i in range(n)),
         Layer("logits", (), logits, 2 * logits)),
        batch=b, seq_len=s, hidden=h, heads=a, precision=precision, ffn=4 * h,
        tied_embedding=v * h)


def llama(layers: int, hidden: int, heads: int, seq_len: int, vocab: int, batch: int = 1,
          *, ffn: int, kv_heads: int | None = None, name: str | None = None,
          precision: Precision = MIXED_PRECISION_ADAM) -> Model:
    """A Llama-style model: no biases, RMSNorm, SwiGLU MLP, grouped-query attention,
    untied output layer (Touvron et al. 2023, "Llama 2", Sec. 2.2 and Table 1).

    A block has 2 h^2 + 2 h (h / a) g parameters of attention (g key / value heads),
    3 h f of MLP (gate, up and down projections of width f) and 2 h of norms; the model
    adds V h of embedding, h of final norm and V h of output layer. A block's forward
    pass costs 2 B s (its matrix parameters) + 4 B s^2 h FLOPs, the output layer
    2 B s h V, and backward twice the forward (as for :func:`gpt`).

    Raises:
        InvalidInputError: a size below 1, ``hidden`` not a multiple of ``heads``, or
            ``heads`` not a multiple of ``kv_heads``.
    """
    n, h, a, s, v, b = _shape(layers, hidden, heads, seq_len, vocab, batch)
    f = integer(ffn, "ffn", minimum=1)
    g = a if kv_heads is None else integer(kv_heads, "kv_heads", minimum=1)
    kv = h // a * g
    matrices = (h * h, h * kv, h * kv, h * h, h * f, h * f, f * h)
    fwd = 2 * b * s * sum(matrices) + 4 * b * s * s * h
    attention = (2 * b * s * sum(matrices[:4]) + 4 * b * s * s * h) / fwd
    logits = 2 * b * s * h * v
    return Model(
        name or f"Llama l={n} h={h}",
        (Layer("embedding", (v * h,), 0.0, 0.0),
         *(Layer(f"block{i}", (h, *matrices[:4], h, *matrices[4:]), fwd, 2 * fwd,
                 block=True, attention_share=attention) for i in range(n)),
         Layer("logits", (h, v * h), logits, 2 * logits)),
        batch=b, seq_len=s, hidden=h, heads=a, precision=precision, kv_heads=g, ffn=f)


def gpt2_1_5b(batch: int = 1, seq_len: int = 1024) -> Model:
    """GPT-2 1.5B (Radford et al. 2019, Table 2: 48 layers, d_model 1600, 1542M
    parameters; 25 heads, 1024 positions, 50257 tokens)."""
    return gpt(48, 1600, 25, seq_len, 50257, batch, name="GPT-2 1.5B")


def llama_7b(batch: int = 1, seq_len: int = 4096) -> Model:
    """A 7B Llama-style shape (Llama 2 7B: 32 layers, h 4096, 32 heads, SwiGLU 11008,
    32000 tokens, 4096 positions; 6.7B parameters)."""
    return llama(32, 4096, 32, seq_len, 32000, batch, ffn=11008, name="Llama 7B")


def llama_70b(batch: int = 1, seq_len: int = 4096) -> Model:
    """A 70B Llama-style shape (Llama 2 70B: 80 layers, h 8192, 64 heads with 8 key /
    value heads, SwiGLU 28672, 32000 tokens, 4096 positions)."""
    return llama(80, 8192, 64, seq_len, 32000, batch, ffn=28672, kv_heads=8,
                 name="Llama 70B")


def split_blocks(model: Model, stages: int, *, name: str = "stages") -> list[list[Layer]]:
    """The model's layers cut into ``stages`` pipeline stages of nearly equal numbers of
    blocks (earlier stages take the extra ones, as ``np.array_split``); layers before the
    first block go to the first stage, layers after the last block to the last. ``name``:
    what errors call the stage count (``step`` passes ``"pp"``).

    Raises:
        InvalidInputError: more stages than blocks.
    """
    stages = integer(stages, name, minimum=1)
    blocks = [i for i, layer in enumerate(model.layers) if layer.block]
    if stages > max(1, len(blocks)):
        raise InvalidInputError(f"{name}={stages} pipeline stages is more than the "
                                f"{len(blocks)} transformer blocks of {model.name}; use at "
                                f"most {max(1, len(blocks))} stage"
                                f"{'s' if len(blocks) > 1 else ''}")
    if not blocks:
        return [list(model.layers)]
    base, extra = divmod(len(blocks), stages)
    cuts, start = [], 0
    for s in range(stages):
        start += base + (s < extra)
        cuts.append(start)
    out: list[list[Layer]] = []
    lo = 0
    for s, cut in enumerate(cuts):
        hi = len(model.layers) if s == stages - 1 else blocks[cut - 1] + 1
        out.append(list(model.layers[lo:hi]))
        lo = hi
    return out


def per_layer_seconds(layers: Sequence[Layer], gpu: GPU, fraction: float) -> list[
        tuple[float, float]]:
    """(forward, backward) seconds of each layer for ``fraction`` of the model's batch."""
    return [(gpu.seconds(x.forward_flops * fraction), gpu.seconds(x.backward_flops * fraction))
            for x in layers]

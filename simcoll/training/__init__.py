"""Training steps on the simulated machine, from a model description to a 3D-parallel step.

* :mod:`~simcoll.training.model`: layers, parameter and FLOP counts, GPT / Llama shapes
  and presets, GPUs, bytes per parameter.
* :mod:`~simcoll.training.data_parallelism`: data parallelism three ways (a loop of
  all-reduces, one fused all-reduce, DDP's overlapped buckets).
* :mod:`~simcoll.training.zero`: ZeRO stages 0-3 / FSDP: memory and communication.
* :mod:`~simcoll.training.pipeline`: GPipe and 1F1B pipelines.
* :mod:`~simcoll.training.tensor`: Megatron tensor (and sequence) parallelism.
* :mod:`~simcoll.training.parallel3d`: ``step``, all of them at once.
* :mod:`~simcoll.training.timeline`: ``plot_timeline`` of any of these steps.
* :mod:`~simcoll.training.bucketed_step`: ``data_parallel_step``, DDP's overlapped
  gradient all-reduce as one ``bucketed`` collective.

Every step but ``data_parallel_step`` (one ``simulate`` of the ``bucketed`` all_reduce,
which also takes ``data=``) is a rank program run by :func:`simcoll.run_program` in
data-free mode; its result keeps the run and the spans of every stream.
"""

from __future__ import annotations

from simcoll.training.bucketed_step import DataParallelStep, data_parallel_step
from simcoll.training.common import ddp_buckets
from simcoll.training.data_parallelism import DataParallelResult, data_parallel
from simcoll.training.model import (
    A100,
    GPU,
    H100,
    MIXED_PRECISION_ADAM,
    Layer,
    Model,
    Precision,
    gpt,
    gpt2_1_5b,
    llama,
    llama_7b,
    llama_70b,
    split_blocks,
)
from simcoll.training.parallel3d import Placement, Step, step
from simcoll.training.pipeline import PipelineStep, pipeline_step, schedule_of
from simcoll.training.streams import Breakdown, Span
from simcoll.training.tensor import TensorParallelLayer, tensor_parallel_layer
from simcoll.training.timeline import plot_timeline
from simcoll.training.zero import ZeroMemory, ZeroStep, zero_memory, zero_step

__all__ = [
    "Model", "Layer", "GPU", "A100", "H100", "Precision", "MIXED_PRECISION_ADAM", "gpt",
    "llama", "gpt2_1_5b", "llama_7b", "llama_70b", "split_blocks",
    "data_parallel", "DataParallelResult", "ddp_buckets",
    "zero_memory", "ZeroMemory", "zero_step", "ZeroStep",
    "pipeline_step", "PipelineStep", "schedule_of",
    "tensor_parallel_layer", "TensorParallelLayer",
    "step", "Step", "Placement",
    "plot_timeline", "Span", "Breakdown",
    "data_parallel_step", "DataParallelStep",
]

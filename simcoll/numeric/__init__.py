"""Real training through the simulated collectives: a small float64 MLP trained with data
parallelism (the plain loop and DDP's buckets), ZeRO stages 1-3 with sharded Adam, a
pipeline with micro-batches and tensor-parallel layer pairs, every gradient and parameter
moved by simcoll's collectives, so that each strategy can be checked against
single-process, full-batch training after every step::

    from simcoll.numeric import MLP, Adam, TrainingJob, data_parallel, train_reference
    job = TrainingJob.synthetic(MLP((16, 32, 4)), batch=128, steps=3, optimizer=Adam(1e-2))
    run = data_parallel(topology, job, algorithm="ring")   # run.params, run.step_times
    ref = train_reference(job)                             # ref.params: the same numbers
"""

from __future__ import annotations

from simcoll.numeric.data_parallel import data_parallel, ddp, ddp_buckets
from simcoll.numeric.job import Batch, TrainingJob, synthetic_batches
from simcoll.numeric.mlp import MLP, Params
from simcoll.numeric.optim import SGD, Adam, AdamState
from simcoll.numeric.pipeline import pipeline, pipeline_schedule, stage_layers
from simcoll.numeric.reference import train_reference
from simcoll.numeric.results import ReferenceRun, StepRecord, TrainingRun
from simcoll.numeric.tensor_parallel import tensor_parallel, tp_pieces
from simcoll.numeric.zero import shard_name, zero

__all__ = [
    "MLP", "Params", "SGD", "Adam", "AdamState", "Batch", "TrainingJob", "synthetic_batches",
    "train_reference", "ReferenceRun", "TrainingRun", "StepRecord",
    "data_parallel", "ddp", "ddp_buckets", "zero", "shard_name", "pipeline",
    "pipeline_schedule", "stage_layers", "tensor_parallel", "tp_pieces",
]

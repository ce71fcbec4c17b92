"""NCCL, simulated: its protocols, channels, rings, trees and NVLS, and its tuner.

``algorithm="nccl"`` runs a collective the way NCCL 2.30.7 would on the simulated machine:
its tuner (:mod:`.tuner`) picks the algorithm, protocol and channel count from the
machine's figures (:mod:`.machine`), and the choice then runs message by message: rings
with slices and per-step overheads (:mod:`.rings`), double binary trees across nodes with
chains inside them (:mod:`.trees`), NVLink SHARP on the NVSwitch (:mod:`.nvls`). The
constants are NCCL's own (:mod:`.constants`); :mod:`.protocols` turns them into wire
bytes and delays; :mod:`.collectives` registers one ``"nccl"`` algorithm per collective.
"""

from __future__ import annotations

from simcoll.algorithms.nccl import collectives

__all__ = ["collectives"]

"""The instruction trace: one record per emulated instruction, read by the cost model."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .errors import SourceLocation


class Engine(StrEnum):
    """NeuronCore engines (nki-facts §4 engine enum, plus DMA queues)."""

    TENSOR = "tensor"
    VECTOR = "vector"
    SCALAR = "scalar"
    GPSIMD = "gpsimd"
    DMA = "dma"


# Not frozen: a frozen dataclass sets each of its 14 fields through object.__setattr__, and
# one Instr is built per emulated instruction. Nothing mutates a recorded Instr.
@dataclass(slots=True)
class Instr:
    """One instruction: what ran, on which engine, how big, from which kernel line.

    partitions/free: the tile's partition count and elements per partition (N in the cost
    rules of nki-facts §6.2). streams: input streams read per element (1 or 2).
    """

    name: str
    engine: Engine
    partitions: int
    free: int
    dtype: str
    location: SourceLocation
    streams: int = 1
    bytes: int = 0
    descriptors: int = 0
    contiguous_bytes: int = 0
    flops: int = 0
    stationary_free: int = 0
    hbm_read: int = 0
    hbm_write: int = 0
    label: str = ""  # new-dialect name= of the instruction

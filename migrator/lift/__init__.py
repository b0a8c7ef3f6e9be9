"""Lifting: recover the tensor program a CUDA kernel computes (see `lifter.lift_task`)."""

from migrator.lift.lifter import LiftResult, Verification, lift_task
from migrator.lift.program import Expr, LiftError, Program, evaluate

__all__ = ["Expr", "LiftError", "LiftResult", "Program", "Verification", "evaluate", "lift_task"]

"""The fidelity scorer: grade an NKI migration against its CUDA original.

``score(cuda_path, candidate_path, ...) -> FidelityReport``. Module map: sandbox + child (the
isolated candidate process), protocol (trials, inputs, oracle), numerics (policy, metrics),
defences (anti-gaming), fidelity (construct checks), performance (profile rules), rubric
(weights, verdict), rules (the C2N4xxx table), models (the report schema), report (text,
Markdown, JSON), cli (``migrate score``), scorer (the pipeline).
"""

from migrator.score.models import SCHEMA_VERSION, FidelityReport, Finding
from migrator.score.scorer import ScoreInputError, score

__all__ = ["SCHEMA_VERSION", "FidelityReport", "Finding", "ScoreInputError", "score"]

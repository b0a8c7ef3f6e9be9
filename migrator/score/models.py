"""The fidelity report: pydantic models with a schema version and a published JSON schema.

``FidelityReport.model_json_schema()`` is the published schema; bump ``SCHEMA_VERSION`` on any
incompatible change. Everything except ``timing`` is deterministic for a given seed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from migrator.score.rules import PENALTY, RULES, Category, Severity

SCHEMA_VERSION = "1.0"
Verdict = Literal["pass", "fail", "error"]


class Finding(BaseModel):
    """One rule hit: what, where (NKI and CUDA lines), why it matters, how to fix it."""

    rule: str  # C2N4xxx
    name: str
    severity: Severity
    category: Category
    weight: float  # fraction of its category's points this finding costs (rubric.PENALTY)
    message: str
    nki_location: str | None = None  # candidate file:line
    cuda_location: str | None = None  # CUDA file:line
    why: str = ""
    fix: str = ""

    @classmethod
    def of(cls, rule_id: str, message: str, **kw: str | None) -> Finding:
        r = RULES[rule_id]
        return cls(
            rule=r.id,
            name=r.name,
            severity=r.severity,
            category=r.category,
            weight=PENALTY[r.severity],
            message=message,
            why=r.why,
            fix=r.fix,
            **kw,
        )


class OutputMetrics(BaseModel):
    """Error metrics of one output in one trial (errors measured against the float64 truth)."""

    name: str
    dtype: str
    elements: int
    max_abs: float
    max_rel: float
    rel_l2: float
    cuda_rel_l2: float  # the CUDA original's own error (fp32, same inputs)
    allowed_rel_l2: float  # k * cuda_rel_l2 + floor(dtype)
    max_ulp: int  # candidate vs truth rounded to the output dtype
    cuda_max_ulp: int
    max_err_scale_ulp: float  # max |c - t| in ulps of the output's largest magnitude
    ulp_histogram: dict[str, int]
    beyond_tolerance: int
    fraction_beyond: float
    nonfinite_mismatch: int  # non-finite where the CUDA original is finite (or vice versa)
    error_ratio: float | None = None  # three-way ratio when the candidate is lower precision
    ok: bool


class Trial(BaseModel):
    """One correctness trial: a seed, an input distribution and a size set."""

    index: int
    seed: int
    distribution: str
    sizes: dict[str, int]
    hidden: bool
    ragged: bool  # some size is not a multiple of 128 / the CUDA block
    status: Literal["ok", "mismatch", "failed", "no_oracle"]
    detail: str | None = None
    outputs: list[OutputMetrics] = Field(default_factory=list)


class Numerics(BaseModel):
    """Summary of the correctness protocol and the numerics policy that was applied."""

    policy: dict[str, float]  # k and floors per dtype
    trials: int
    passed: int
    worst_rel_l2: float
    worst_max_ulp: int
    ulp_histogram: dict[str, int]
    feedback: list[str] = Field(default_factory=list)


class Performance(BaseModel):
    """Modelled performance of the candidate vs the reference and the roofline."""

    estimated_latency_us: float | None = None
    reference_latency_us: float | None = None
    reference: str | None = None  # which reference ("generated" / expert path)
    ratio_to_reference: float | None = None
    roofline_latency_us: float | None = None
    roofline_fraction: float | None = None
    bottleneck: str | None = None
    engine_busy_us: dict[str, float] = Field(default_factory=dict)
    reference_engine_busy_us: dict[str, float] = Field(default_factory=dict)
    dma_bytes: int | None = None
    mean_descriptor_bytes: float | None = None
    peak_sbuf_bytes_per_partition: int | None = None
    peak_psum_banks: int | None = None
    hotspots: list[str] = Field(default_factory=list)


class CategoryScore(BaseModel):
    name: str
    weight: float
    fraction: float  # 0..1
    points: float  # weight * fraction
    findings: int


class Sandbox(BaseModel):
    """How the candidate was isolated (what the OS allowed)."""

    network_isolated: bool
    isolation: list[str]
    limits: dict[str, float]


class Timing(BaseModel):
    """Wall-clock seconds; the only non-deterministic part of a report."""

    total_s: float = 0.0
    oracle_s: float = 0.0
    candidate_s: float = 0.0
    reference_s: float = 0.0


class FidelityReport(BaseModel):
    schema_version: str = SCHEMA_VERSION
    kernel: str
    cuda_file: str
    candidate_file: str
    spec_file: str | None
    seed: int
    verdict: Verdict
    score: float  # 0..100
    gate_passed: bool
    summary: str
    categories: list[CategoryScore] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    numerics: Numerics | None = None
    trials: list[Trial] = Field(default_factory=list)
    performance: Performance = Field(default_factory=Performance)
    sandbox: Sandbox | None = None
    timing: Timing = Field(default_factory=Timing)

    def rule_ids(self) -> set[str]:
        return {f.rule for f in self.findings}

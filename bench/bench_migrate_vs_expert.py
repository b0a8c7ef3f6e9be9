"""Generated NKI vs hand-written expert NKI: the cost model's estimated latency on the same inputs.

For matmul, softmax, layernorm and attention (plain and causal), `migrate` emits a kernel from
the CUDA original; the expert reference in `corpus/expert/` was written by hand in the style of
the optimised NKI tutorials.
Both run in the emulator on identical inputs at the spec's default sizes and at larger sizes; the
ratio generated / expert is reported (goal: at most 1.25). Also prints `migrate` wall time.
`--all`: every corpus kernel with an expert and a complete migration, at its default sizes,
with the geometric mean of the ratios and how many are within the goal.

    python bench/bench_migrate_vs_expert.py [--target trn2] [--quick] [--all]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from migrator.contract import load_spec, make_inputs
from migrator.migration import migrate

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    # stem, expert file, kernel name, extra size sets
    ("matmul_tiled", "sgemm_tiled_expert.py", "sgemm_tiled",
     [{"M": 512, "N": 1024, "K": 512}, {"M": 1024, "N": 1024, "K": 1024}]),
    ("softmax_row", "softmax_row_expert.py", "softmax_row", [{"R": 2048, "C": 2048}]),
    ("layernorm", "layernorm_expert.py", "layernorm", [{"R": 2048, "C": 1024}]),
    ("attention_fwd", "attention_fwd_expert.py", "attention_fwd",
     [{"S": 512}, {"S": 1000, "D": 128}, {"S": 2048}, {"S": 4096, "D": 128}]),
    ("attention_causal_online", "attention_causal_online_expert.py", "attention_causal_online",
     [{"T": 512, "D": 64}, {"T": 1000}, {"T": 4096}]),
]  # fmt: skip


def main() -> None:
    import migrator.nki as mn

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--target", default="trn2", choices=["trn1", "trn2"])
    ap.add_argument("--quick", action="store_true", help="default sizes only")
    ap.add_argument("--all", action="store_true", help="every expert/generated pair, defaults")
    args = ap.parse_args()
    opts = mn.EmulatorOptions(target=args.target)
    if args.all:
        return whole_corpus(opts)
    print(f"{'kernel':<14} {'sizes':<26} {'generated us':>13} {'expert us':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for stem, expert_file, name, extra in CASES:
            spec = load_spec(ROOT / "corpus" / f"{stem}.toml")
            t0 = time.perf_counter()
            m = migrate(ROOT / "corpus" / f"{stem}.cu", kernel=spec.kernel.name, out_dir=tmp,
                        check=False)  # fmt: skip
            wall = time.perf_counter() - t0
            gen = getattr(mn.load_kernel_module(m.kernels[0].nki_file), name)
            ref = getattr(mn.load_kernel_module(ROOT / "corpus" / "expert" / expert_file), name)
            for sizes in [dict(spec.sizes)] + (
                [] if args.quick else [{**spec.sizes, **x} for x in extra]
            ):
                ins = make_inputs(spec, sizes, seed=0)
                arrays = [ins[t.name] for t in spec.inputs_in_order]
                kw = spec.nki_kwargs(sizes)
                g = mn.profile(gen, *arrays, options=opts, **kw).estimated_latency_us
                e = mn.profile(ref, *arrays, options=opts, **kw).estimated_latency_us
                label = ",".join(f"{k}={v}" for k, v in sizes.items())
                print(f"{stem:<14} {label:<26} {g:>13.2f} {e:>10.2f} {g / e:>6.2f}")
            print(f"{'':<14} migrate (no check) {wall:.2f} s")


def whole_corpus(opts: object) -> None:
    import math

    import migrator.nki as mn

    ratios: list[float] = []
    print(f"{'kernel':<20} {'generated us':>13} {'expert us':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for toml in sorted((ROOT / "corpus").glob("*.toml")):
            spec = load_spec(toml)
            name = spec.kernel.name.removesuffix("_kernel")
            expert = ROOT / "corpus" / "expert" / f"{name}_expert.py"
            if not expert.is_file():
                continue
            m = migrate(toml.with_suffix(".cu"), kernel=spec.kernel.name, out_dir=tmp,
                        check=False)  # fmt: skip
            km = m.kernels[0]
            if km.status != "complete" or not km.nki_file:
                print(f"{toml.stem:<20} {'(no migration)':>13}")
                continue
            ins = make_inputs(spec, spec.sizes, seed=0)
            arrays = [ins[t.name] for t in spec.inputs_in_order]
            kw = spec.nki_kwargs()
            gen = getattr(mn.load_kernel_module(km.nki_file), name)
            ref = getattr(mn.load_kernel_module(expert), name)
            g = mn.profile(gen, *arrays, options=opts, **kw).estimated_latency_us
            e = mn.profile(ref, *arrays, options=opts, **kw).estimated_latency_us
            ratios.append(g / e)
            print(f"{toml.stem:<20} {g:>13.2f} {e:>10.2f} {g / e:>6.2f}")
    gmean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    within = sum(r <= 1.25 for r in ratios)
    print(
        f"{len(ratios)} pairs: geometric mean {gmean:.2f}x, {within} within 1.25x, "
        f"worst {max(ratios):.2f}x"
    )


if __name__ == "__main__":
    main()

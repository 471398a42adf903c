"""Measure the model-form error on published runs and write hardware/model_form.yaml.

``python -m costmodel.fit.model_form [CSV ...] [-o FILE]`` runs ``costmodel validate`` on the dev
sets (default: benchmarks/data/dev_set.csv, dev_set_hopper.csv, dev_set_megatron_bridge.csv and dev_set_moe.csv of
the checkout), groups the used
rows by regime (costmodel.model_error: stack, GPU generation, model size or MoE) and writes each regime's
one-sigma relative error with its row count and the inputs' sha256.  Rerun it whenever the model's
physics changes: the band of every prediction reads this table.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from ..model_error import MIN_ROWS, ONE_SIGMA_QUANTILE, estimate
from ..specs import hardware_dir
from ..specs.profile import dump_profile

CHECKOUT = Path(__file__).resolve().parents[2]
DEV_SETS = [CHECKOUT / "benchmarks" / "data" / f
            for f in ("dev_set.csv", "dev_set_hopper.csv", "dev_set_megatron_bridge.csv", "dev_set_moe.csv")]


def measure(paths) -> dict:
    """The model-form table (costmodel.model_error.estimate) of the used rows of ``paths``, with provenance.

    Raises:
        InputError: an unreadable CSV or one without the dev-set columns.
    """
    from ..validate import read_runs_csv, validate_rows
    regimes, errors, inputs = [], [], []
    for path in paths:
        for r in validate_rows(read_runs_csv(path), str(path)):
            # a row whose step includes a cost the model lacks ('*-not-modelled') measures that cost,
            # not the model's error on what it models
            if not r.skipped and not any(a.endswith("-not-modelled") for a in r.assumed):
                regimes.append(r.regime)
                # relative to the prediction: the band is +/- sigma x the predicted step time
                errors.append((r.measured_s - r.predicted_s) / r.predicted_s)
        inputs.append({"file": Path(path).name, "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()})
    return {"sigma": estimate(regimes, errors),
            "provenance": {"generated_by": "python -m costmodel.fit.model_form", "inputs": inputs,
                           "rows": len(errors),
                           "estimator": f"{ONE_SIGMA_QUANTILE}th percentile of |measured - predicted| / predicted step time "
                                        f"per regime (stack/generation/size or moe, then coarser), >= {MIN_ROWS} rows"}}


def main(argv=None) -> int:
    """Command line: measure and write the table (default: the built-in hardware/model_form.yaml)."""
    ap = argparse.ArgumentParser(prog="python -m costmodel.fit.model_form", description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="*", default=[str(p) for p in DEV_SETS], help="published-run CSVs (validate schema)")
    ap.add_argument("-o", "--out", default=str(hardware_dir() / "model_form.yaml"))
    a = ap.parse_args(argv)
    table = measure(a.csv)
    Path(a.out).write_text(dump_profile(table, "# model-form error of the cost model on published runs, by regime "
                                               "(costmodel/model_error.py); regenerate: python -m costmodel.fit.model_form\n"))
    print(f"wrote {a.out}: {len(table['sigma'])} regimes from {table['provenance']['rows']} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())

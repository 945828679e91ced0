"""The tables the evidence stage reads, declared once: name -> the columns each must have and
what its ``lostmid evidence`` option takes. The fields of ``lostmid.evidence.inputs.Inputs``, the
command's options (``lostmid.cli.evidence``) and the evidence rule's inputs
(``lostmid.jobs.EVIDENCE_TABLES``) are built from it, in this order. Free of pandas and torch:
the workflow reads it when it parses the config."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EvidenceTable:
    columns: tuple[str, ...]  # required: a table without one of them is refused
    help: str  # what the command's option takes (Parquet files)


# The tables the evidence stage reads, each with the columns it needs: the one declaration.
_RUN_KEYS = ("variant", "L", "depth", "seed", "step")
TABLES = {
    "failure": EvidenceTable((*_RUN_KEYS, "p", "n", "failures"), "results/failure files (one per run)"),
    "metrics": EvidenceTable((*_RUN_KEYS, "delta", "E_inf"), "results/metrics files"),
    # Influence predicts failure (lostmid.evidence.influence_failure): the averaged and the conditioned measure.
    "influence": EvidenceTable((*_RUN_KEYS, "layer", "position", "density"), "results/influence files"),
    "answer_influence": EvidenceTable(
        (*_RUN_KEYS, "flag_pos", "position", "density"),
        "results/answer_influence files (the input energy at f-1 over the sequences with their flag at f)",
    ),
    "density_flow": EvidenceTable((*_RUN_KEYS, "eta", "rel_error"), "results/density_flow files"),
    "conditions": EvidenceTable(
        (*_RUN_KEYS, "delta", "test", "holds", "conclusion_holds", "lhs", "rhs"),
        "results/conditions files",
    ),
    "structural": EvidenceTable(
        ("residual", "L", "depth", "layer", "position", "measured", "closed_form"), "the structural baseline table"
    ),
    "init_sweep": EvidenceTable(
        ("residual", "depth", "seed", "position", "density", "output_jacobian"),
        "the initialization sweep table (with output_jacobian)",
    ),
    "bias_matrix": EvidenceTable(
        ("L", "depth", "query", "key", "bias"), "results/bias_fit_matrix files (the fitted B, long format)"
    ),
    # One row per held-out initialization of a bias fit (docs/evidence.md, "The bias fit's checks").
    "bias_summary": EvidenceTable(
        tuple(
            "variant L depth target positions fit_model param heldout_init imbalance_before imbalance_after "
            "context_share_before context_share_after c0 lag_slope self_attention_init self_attention_init_b0 "
            "accepted".split()
        ),
        "results/bias_fit_summary files (the bias fit's checks, one row per held-out initialization)",
    ),
    "algebraic_table": EvidenceTable(
        ("method", "left", "middle", "right", "LIM", "E_inf", "Z", "obs_imbalance"),
        "the algebraic simulations' Table 1 (table.parquet)",
    ),
    "algebraic_probes": EvidenceTable(("n_probe", "rel_bias", "rel_std"), "the algebraic probe study (probes.parquet)"),
    "observability": EvidenceTable(
        (*_RUN_KEYS, "position", "trace", "trace_density", "jacobian_density"),
        "results/observability files (loss-free profiles of the runs of influence.trace_variants)",
    ),
    # The retrieval stage's per-example rows (docs/retrieval.md): the influence claims read them.
    "retrieval": EvidenceTable(
        ("model", "weights", "n", "task", "q", "window", "success", "influence_task", "influence_free"),
        "results/retrieval/examples.parquet (the retrieval stage's per-example rows)",
    ),
    "train": EvidenceTable(
        (*_RUN_KEYS, "seconds_per_step", "peak_mem_mb"),
        "results/train files (per-step time and peak memory: the overhead claims)",
    ),
    # The sequence-length study (docs/length.md; lostmid.analysis.length).
    "length_init": EvidenceTable(
        ("L", "residual", "seed", "position", "density", "output_jacobian"),
        "the length study's profiles at initialization (results/length/init.parquet)",
    ),
    "length_fit": EvidenceTable(
        ("L", "residual", "bias", "fitted_at", "heldout_init", "position", "output_jacobian"),
        "the length study's held-out profiles of the fitted B (results/length/fit_profiles.parquet)",
    ),
    "length_fits": EvidenceTable(
        ("L", "param", "seconds", "accepted", "imbalance_before", "imbalance_after"),
        "the length study's fits, their held-out checks and costs (results/length/fits.parquet)",
    ),
}

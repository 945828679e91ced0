"""Command of the results page: a run's results.md (the default run's: runs/default/results.md), written in one
go from a finished run's tables.

    lostmid results-page --results results --out results/results.md     # the whole page, in the run's folder
    lostmid results-page --results results --headline                 # one line per claim family

The page is stamped from the run's own manifest (``results/manifest.json``, lostmid.manifest): the
commit the run was made from, its config files and their digests, its numerics and machine; never
from the working directory the page is written in. A run made from a tree with uncommitted changes,
or not under the deterministic numerics, says so on the page's first line. Every section comes from
a table of the run; a table the run does not have is one line saying so. Before anything is written the
run is checked (lostmid.records): its manifest lists an invocation, its ``overlay.yaml`` (a record under
runs/ keeps one) has the hash the manifest records, every table the page reads is readable and the
evidence table's rows are unique; else one line naming the file. ``--out`` is written atomically, and a
page git tracks is replaced only by a page of the same run (its ``Run:`` line), unless ``--force``.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from lostmid import io, manifest
from lostmid.cli.registry import command
from lostmid.errors import ConfigError

LABEL = "this run"  # the run's label when no --label is given


def _args(parser):
    parser.add_argument("--results", type=Path, default=Path("results"), help="a finished run's results folder")
    parser.add_argument("--out", type=Path, default=None, help="write the page here (default: print it)")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace --out even where git tracks it and it was written from another run (its Run: line differs); "
        "without it such a page is refused, so that a new run never rewrites a committed record's page",
    )
    parser.epilog = (
        "Before anything is written the run is checked: its manifest (at least one invocation), its overlay.yaml "
        "where it keeps one (the sha256 the manifest records), every table the page reads readable and the "
        "evidence rows unique; else one line naming the file, exit status 2, nothing written. The stamp reads "
        "every invocation and warns on its first line. --out is written atomically; a page git tracks is "
        "replaced only by a page of the same run (the stamp's Run: line: its commits and config hashes)."
    )
    parser.add_argument("--headline", action="store_true", help="print only the headline verdicts (for the README)")
    parser.add_argument(
        "--label", default=LABEL, help="the run's label beside others (e.g. confirmatory for runs/confirm/overlay.yaml)"
    )
    parser.add_argument(
        "--beside",
        nargs="*",
        default=[],
        metavar="LABEL=RESULTS",
        help="other runs' results folders whose evidence rows are shown beside this run's (default=../default/results)",
    )


def page_command(results: Path, label: str, beside: list[str], out: Path | None) -> str:
    """The ``lostmid results-page`` command line that writes this page, its paths as given."""
    words = ["lostmid results-page", f"--results {shlex.quote(str(results))}"]
    if label != LABEL:
        words.append(f"--label {shlex.quote(label)}")
    if beside:
        words.append("--beside " + " ".join(shlex.quote(item) for item in beside))
    if out is not None:
        words.append(f"--out {shlex.quote(str(out))}")
    return " ".join(words)


def stamp(results: Path, command: str) -> str:
    """The page's opening: where its numbers came from (the run's manifest) and how to redo it."""
    return manifest.stamp(manifest.read(results)) + f"\n\nWritten by `{command}` from the tables of that run.\n"


# The columns that make a row of a table the page reads (its rows are checked unique); a table not named
# here is checked readable.
TABLE_KEYS = {"evidence": ("claim", "setting")}


def _table(results: Path, name: str):
    from lostmid.records import read_table

    folder = results / name
    if not (folder.exists() and any(folder.rglob("*.parquet"))):
        return None
    return read_table(folder, TABLE_KEYS.get(name, ()), finite=False)


def _missing(name: str) -> str:
    return f"Not in this run (`results/{name}` has no table).\n"


def architectures_section(results: Path) -> str:
    from lostmid.architectures import summary

    comparison = _table(results, "architectures_comparison")
    if comparison is None:
        return _missing("architectures_comparison")
    parts = []
    for title, query in (
        ("Random-initialization sweep", "family != 'flag'"),
        ("Flag-recall checkpoints, untrained", "family == 'flag' and step == 0"),
        ("Flag-recall checkpoints, trained", "family == 'flag' and step > 0"),
    ):
        rows = comparison.query(query)
        if not rows.empty:
            command = f'lostmid architectures-summary --markdown results/architectures_comparison --query "{query}"'
            parts.append(f"### {title}\n\n`{command}`:\n\n{summary.markdown(rows)}")
    return "\n".join(parts) or "The comparison table has no rows.\n"


def remedies_section(results: Path) -> str:
    from lostmid.architectures.summary import to_markdown

    table = _table(results, "remedies_summary")
    if table is None:
        return _missing("remedies_summary")
    keys = ["variant", "L", "depth"]
    last = table[table.step == table.groupby(keys).step.transform("max")]
    cells = last.assign(
        value=[
            f"{m:.3g}" if n < 2 else f"{m:.3g} [{lo:.3g}, {hi:.3g}]"
            for m, lo, hi, n in zip(last["mean"], last.ci_low, last.ci_high, last.n_seeds)
        ]
    )
    wide = cells.pivot_table(index=[*keys, "step", "n_seeds"], columns="quantity", values="value", aggfunc="first")
    return (
        "Each variant at its last checkpoint: mean over seeds [95% t-interval] "
        "(`results/remedies_summary`; docs/remedies.md):\n\n" + to_markdown(wide.reset_index()) + "\n"
    )


def algebraic_section(results: Path) -> str:
    from lostmid.architectures.summary import to_markdown

    table = _table(results, "algebraic_table")
    if table is None:
        return _missing("algebraic_table")
    columns = ["method", "left", "middle", "right", "Delta", "LIM", "E_inf", "Z", "obs_imbalance"]
    return "`results/algebraic_table` (docs/algebraic.md):\n\n" + to_markdown(table[columns]) + "\n"


def retrieval_section(results: Path) -> list[str]:
    """The retrieval stage's section, only for a run that has it (the stage is optional: config/retrieval.yaml)."""
    if _table(results, "retrieval") is None:
        return []
    from lostmid.architectures.retrieval_summary import markdown

    heading = "## Retrieval by needle position (docs/retrieval.md)\n"
    return [heading, "`lostmid retrieval-tables --results results`:\n\n" + markdown(results)]


def cost_section(results: Path) -> str:
    from lostmid.architectures.summary import to_markdown
    from lostmid.tables.run_cost import cost_by_stage, job_costs

    jobs = job_costs(results)
    if jobs.empty:
        return _missing("logs")
    return (
        "Per stage, from each job's own log line `job cpu X s ..., peak memory Y MB` and Snakemake's benchmark "
        "record (`results/benchmarks`); job CPU and wall-clock seconds summed over the stage's jobs, peak "
        "memory the largest (docs/performance.md):\n\n" + to_markdown(cost_by_stage(jobs).round(1), digits=6) + "\n"
    )


def _evidence(results: Path):
    from lostmid.evidence.report import with_status

    evidence = _table(results, "evidence")
    if evidence is None:
        raise ConfigError(f"{results}/evidence has no evidence table; is {results} a finished run?")
    return with_status(evidence)


def beside_section(evidence, label: str, beside: list[str]) -> list[str]:
    """The section with this run's evidence rows beside other runs' (``--beside LABEL=RESULTS``)."""
    from lostmid.pages.evidence import side_by_side

    if not beside:
        return []
    runs = {label: evidence}
    for item in beside:
        other, _, folder = item.partition("=")
        if not folder:
            raise ConfigError(f"--beside {item!r}: expected LABEL=RESULTS_FOLDER")
        runs[other] = _evidence(Path(folder))
    return [
        f"## The {label} run beside {', '.join(list(runs)[1:])}\n",
        "Each row of this run with the same row of the others (claim, variant, L, depth):\n",
        side_by_side(runs),
    ]


def page(
    results: Path,
    label: str = LABEL,
    beside: list[str] = (),
    out: Path | None = None,
) -> str:
    from lostmid.pages.evidence import headline, markdown, rule_ids, split_kinds, verdict_summary

    evidence = _evidence(results)
    sources, checks = split_kinds(evidence)
    ids = rule_ids(evidence)  # one numbering of the rules for both tables of the page
    sections = [
        "# Results of a run\n",
        stamp(results, page_command(results, label, list(beside), out)),
        "## Headline verdicts\n",
        "`lostmid results-page --results results --headline`: one line per claim family.\n",
        headline(evidence),
        "## Verdict summary\n",
        "Each claim of the blog in the blog's own setting, the counts, and every contradicted or not-evaluable row:\n",
        verdict_summary(evidence),
        "## Evidence: every claim of the blog and the paper\n",
        "`lostmid evidence --markdown --table results/evidence` (the table: `results/evidence`; how each statistic, "
        "interval and decision rule is defined: docs/evidence.md). The sources' claims (`kind` claim):\n",
        markdown(sources, ids),
        "## Checks of the instrument\n",
        "The rows of `kind` check: closed forms, the flow error, the probes, an intervention's own check "
        "(not counted among the claims):\n",
        markdown(checks, ids) if len(checks) else "None in this table.\n",
        *beside_section(evidence, label, beside),
        "## Remedies\n",
        remedies_section(results),
        "## Algebraic simulations (paper §4, Table 1)\n",
        algebraic_section(results),
        "## Real architectures against the rollout theories\n",
        architectures_section(results),
        *retrieval_section(results),
        "## What the run cost\n",
        cost_section(results),
    ]
    return io.wrap_prose("\n".join(sections))


@command("results-page", "a run's results.md from its tables (or only its headline verdicts)", _args)
def results_page(args):
    from lostmid import records
    from lostmid.pages.evidence import headline

    run = manifest.read(args.results)  # before this command writes anything: no page from an unrecorded run
    if (args.results / records.OVERLAY).exists():  # a run record keeps its overlay: the one the run ran
        records.check_overlay(args.results / records.OVERLAY, run)
    names = ", ".join(f"`{manifest.shown(item['path'], run.get('workdir'))}`" for item in run["configs"])
    commits = ", ".join(manifest.commits(run))
    block = f"From the run of {names} at commit `{commits}` (every table: runs/default/results.md):\n\n"
    block += headline(_evidence(args.results))
    if args.headline:
        print(block, end="")
    elif args.out:
        records.refuse_other(args.out, manifest.identity(run), args.force)  # before the page is made
        io.write_text(page(args.results, args.label, args.beside, args.out), args.out)
    else:
        print(page(args.results, args.label, args.beside), end="")

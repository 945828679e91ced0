"""Every figure, checked as a figure editor checks it, from the matplotlib objects (never pixels): its size at
the printed width (3.3 or 6.8 in, at most 7 x 9), its text at least 7 pt there, no empty panel, every band
inside its quantity's range, each arm its own colour and its own line or marker; each saved as PNG and PDF.
Small synthetic tables, seconds each."""

from __future__ import annotations

import math

import matplotlib.collections as mcoll
import matplotlib.colors as mcolors
import matplotlib.lines as mlines
import matplotlib.pyplot as plt
import matplotlib.text as mtext
import numpy as np
import pandas as pd
import pytest
import yaml

from lostmid.plots import blog, findings, influence, remedies, retrieval, style, training

from conftest import REPO

# The default config's arms, as config/config.yaml declares them: the blog's setting (L 16, depth 4, 1,500
# steps) and the remedies' (L 24, depth 2, 600 steps); reweight never learns here.
VARIANTS = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["variants"]
ARMS = {
    ("baseline", 16, 4): (1500, 4),
    ("debiased_literal", 16, 4): (1500, 4),
    ("debiased", 16, 4): (1500, 2),
    ("baseline_short", 24, 2): (600, 3),
    ("debiased_short", 24, 2): (600, 3),
    ("reweight", 24, 2): (600, 3),
}
RNG = np.random.default_rng(0)


def runs(every: int = 3):
    """(variant, L, depth, seed, steps, checkpoints) of each synthetic run."""
    for (variant, L, depth), (steps, seeds) in ARMS.items():
        for seed in range(seeds):
            yield variant, L, depth, seed, steps, np.linspace(0, steps, every).astype(int)


def failure_table() -> pd.DataFrame:
    """Failure rates that spread over seeds from 0 to 1: a mean +- 1.96 SE band would leave [0, 1]."""
    rows = []
    for variant, L, depth, seed, steps, checkpoints in runs():
        for step in checkpoints:
            for f in range(2, L + 1):
                learned = 0.0 if variant == "reweight" else step / steps
                rate = np.clip(0.5 * (1 - learned) * (1 + f / L) + RNG.normal(0, 0.3), 0, 1)
                rows.append((variant, L, depth, seed, step, f, f / L, 32, rate))
    columns = ["variant", "L", "depth", "seed", "step", "flag_pos", "p", "n", "failure_rate"]
    table = pd.DataFrame(rows, columns=columns)
    return table.assign(failures=(table.failure_rate * table.n).round())


def train_table() -> pd.DataFrame:
    """Losses over orders of magnitude across seeds (a linear band would go below 0), accuracies near 1."""
    rows = []
    for variant, L, depth, seed, steps, _ in runs():
        for step in range(1, steps + 1, 5):
            learns = variant != "reweight"
            progress = step / steps if learns else 0.0
            loss = 0.7 * np.exp(-6 * progress * RNG.uniform(0.5, 2)) * RNG.lognormal(0, 0.8)
            accuracy = np.clip(0.5 + 0.5 * progress + RNG.normal(0, 0.08), 0, 1)
            rows.append((variant, L, depth, seed, step, loss, accuracy))
    return pd.DataFrame(rows, columns=["variant", "L", "depth", "seed", "step", "loss", "accuracy"])


def influence_table() -> pd.DataFrame:
    """Densities log-normal over seeds (sigma 1.5): the arithmetic mean - 1.96 SE is below zero."""
    rows = []
    for variant, L, depth, seed, _, checkpoints in runs():
        for step in checkpoints:
            for layer in range(depth + 1):
                for i in range(1, L + 1):
                    density = np.exp(-4 * (1 - i / L)) * RNG.lognormal(0, 1.5)
                    rows.append((variant, L, depth, seed, step, layer, i, (i - 0.5) / L, density, density))
    columns = ["variant", "L", "depth", "seed", "step", "layer", "position", "p", "energy", "density"]
    return pd.DataFrame(rows, columns=columns)


def sweep_table() -> pd.DataFrame:
    """The init sweep: the output Jacobian falls by orders of magnitude with j and depth, spread over seeds."""
    rows = [
        (residual, depth, seed, j, (j - 0.5) / 16, 1.0, 1.0, 10.0 ** (-depth * j / 4) * RNG.lognormal(0, 1.0))
        for residual in (False, True)
        for depth in range(1, 5)
        for seed in range(3)
        for j in range(1, 17)
    ]
    columns = ["residual", "depth", "seed", "position", "p", "energy", "density", "output_jacobian"]
    return pd.DataFrame(rows, columns=columns)


@pytest.fixture
def drawn(monkeypatch):
    """Call ``draw(module, function, *args)``: the figure the function drew, kept at its ``save`` (which
    writes nothing here: test_a_finding... checks the files ``style.save`` writes)."""

    def draw(module, function, *args, **kwargs):
        figures = []

        def keep(grid, path):
            figures.append(grid.figure if hasattr(grid, "figure") else grid)
            assert_printable(figures[-1])  # every figure drawn here is checked at its printed size
            plt.close(figures[-1])

        monkeypatch.setattr(module, "save", keep)
        getattr(module, function)(*args, **kwargs)
        assert len(figures) == 1
        return figures[0]

    return draw


def assert_printable(fig):
    """Drawn at a printed width (one column or two), within a page, every text at least 7 pt at that size."""
    width, height = style.printed_size(fig)
    assert width <= style.MAX_WIDTH and height <= style.MAX_HEIGHT, f"{width:.2f} x {height:.2f} in"
    assert min(abs(width - style.ONE_COLUMN), abs(width - style.TWO_COLUMNS)) < 0.4, f"{width:.2f} in wide"
    texts = [t for t in fig.findobj(mtext.Text) if t.get_visible() and t.get_text().strip()]
    small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < style.MIN_FONT]
    assert not small, f"text under {style.MIN_FONT} pt: {small[:3]}"


def legend_lines(fig) -> dict:
    """``{label: Line2D}`` of every legend of the figure (the figure's and its axes')."""
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return {
        text.get_text(): handle
        for legend in legends
        for handle, text in zip(legend.legend_handles, legend.get_texts())
        if isinstance(handle, mlines.Line2D)
    }


def assert_arms_distinct(fig, names=None):
    """Each arm of the legend (those named in ``names``, else all) its own colour and its own line or marker: the
    arms are told apart in colour and in greyscale."""
    lines = {k: v for k, v in legend_lines(fig).items() if names is None or any(k.startswith(n) for n in names)}
    assert len(lines) >= 2, f"fewer than two arms in the legend: {list(lines)}"
    colors = [tuple(np.round(mcolors.to_rgb(h.get_color()), 3)) for h in lines.values()]
    shapes = [(h.get_linestyle(), str(h._unscaled_dash_pattern), h.get_marker()) for h in lines.values()]
    assert len(set(colors)) == len(lines), f"arms share a colour: {list(lines)}"
    assert len(set(shapes)) == len(lines), f"arms share a line and marker: {list(zip(lines, shapes))}"


def panels(fig):
    """The figure's data axes (colour bars and legends' axes left out)."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def assert_no_empty_panel(fig):
    """Every panel draws data (a line with points, a filled area, bars, an image) or says in words why not."""
    for ax in panels(fig):
        lines = [line for line in ax.lines if len(line.get_xdata())]
        has = lines or ax.collections or ax.patches or ax.images or ax.texts
        assert has, f"empty panel {ax.get_title()!r}"


def band_limits(ax):
    """(low, high) of the y values of every filled band (fill_between) of an axes."""
    values = [
        path.vertices[:, 1]
        for coll in ax.collections
        if isinstance(coll, mcoll.PolyCollection)
        for path in coll.get_paths()
    ]
    values = np.concatenate(values) if values else np.array([])
    values = values[np.isfinite(values)]
    return (values.min(), values.max()) if values.size else (math.nan, math.nan)


def line_limits(ax):
    """(low, high) of the y values of every line of an axes."""
    values = np.concatenate([np.asarray(line.get_ydata(), float) for line in ax.lines] or [np.array([])])
    values = values[np.isfinite(values)]
    return (values.min(), values.max()) if values.size else (math.nan, math.nan)


def assert_in_range(fig):
    """Rates (accuracy, failure) stay in [0, 1]; anything on a log axis stays above 0."""
    for ax in panels(fig):
        label = ax.get_ylabel()
        for low, high in (band_limits(ax), line_limits(ax)):
            if math.isnan(low):  # nothing of this kind drawn
                continue
            if "rate" in label or "accuracy" in label:
                assert 0 <= low and high <= 1, f"{ax.get_title()!r}: {label} spans [{low}, {high}]"
            if ax.get_yscale() == "log":
                assert low > 0, f"{ax.get_title()!r}: a band reaches {low} on a log axis"


def assert_saved(path):
    assert path.stat().st_size > 0 and style.vector_path(path).stat().st_size > 0


def test_the_findings_forest_colours_each_primary_by_the_words_its_sentence_opens_with(monkeypatch, tmp_path):
    """Every answer the sentences can give (lostmid.study.reading.answer), each primary on the source's-size axis:
    the row's colour is the one its words have, the words are the legend, 1 is the source's size."""
    from lostmid.study import reading
    from lostmid.study.reading import answer

    cases = [  # (outcome, low, high, direction, size): every branch of the reading's words
        (reading.AT_LEAST, 0.5, 0.9, "increase", 0.4),
        (reading.SMALLER, 0.1, 0.3, "increase", 0.4),
        (reading.NO_EFFECT, -0.05, 0.2, "increase", 0.4),
        (reading.INCONCLUSIVE, 0.1, 0.6, "increase", 0.4),  # excludes 0: "an effect", not grey
        (reading.INCONCLUSIVE, -60.0, 10.0, "decrease", 50.0),
        (reading.NO_EFFECT, 5.0, 20.0, "decrease", 50.0),  # on the other side of 0
    ]
    rows = [
        {"name": f"primary {i}", "estimate": (low + high) / 2, "low": low, "high": high,
         "source_size": size if direction == "increase" else -size, "unit": "units",
         "outcome": answer(outcome, low, high, direction)}
        for i, (outcome, low, high, direction, size) in enumerate(cases)
    ] + [{"name": "not run", "estimate": None, "low": None, "high": None, "source_size": 1.0, "unit": "u",
          "outcome": "not yet run"}]  # fmt: skip
    saved = []
    monkeypatch.setattr(findings, "save", lambda fig, path: saved.append(fig) or style.save(fig, path))
    findings.finding_figure(rows, tmp_path / "f.png")
    fig = saved[0]
    assert_saved(tmp_path / "f.png")
    assert_printable(fig)
    ax = fig.axes[0]
    markers = [line for line in ax.lines if line.get_marker() not in ("None", "", None)]
    assert len(markers) == len(cases)  # the primary without an estimate is named, not drawn
    for line, row in zip(markers, rows):
        color, marker, _ = findings.answer_style(row["outcome"])
        assert mcolors.to_rgb(line.get_color()) == mcolors.to_rgb(color) and line.get_marker() == marker
        assert line.get_xdata()[0] == pytest.approx(row["estimate"] / row["source_size"])
    words = set(legend_lines(fig))
    assert {r["outcome"].removesuffix(" (on the other side of 0)") for r in rows[:3]} <= words
    assert "the source's size" in words and any(list(line.get_xdata()) == [1.0, 1.0] for line in ax.lines)
    assert "not yet run" in ax.get_yticklabels()[-1].get_text()


def test_an_inconclusive_interval_that_excludes_zero_is_not_drawn_as_undecided():
    """d_speed_noresidual's case: the sentence says "an effect", so its colour is not the undecided grey."""
    from lostmid.study import reading
    from lostmid.study.reading import answer

    effect = answer(reading.INCONCLUSIVE, 0.1, 0.6, "increase")
    undecided = answer(reading.INCONCLUSIVE, -0.1, 0.6, "increase")
    assert findings.answer_style(effect)[0] != findings.answer_style(undecided)[0]


def test_the_findings_forest_refuses_words_that_are_no_answer():
    row = {"name": "x", "estimate": 1.0, "low": 0.5, "high": 1.5, "source_size": 1.0, "unit": "u", "outcome": "maybe"}
    with pytest.raises(ValueError, match="'maybe' is not an answer's words"):
        findings.finding_figure([row], "unused.png")
    with pytest.raises(ValueError, match=r"'x' lacks \['source_size'\]"):
        findings.finding_figure([{k: v for k, v in row.items() if k != "source_size"}], "unused.png")


def test_every_arm_has_its_own_colour_line_and_marker_in_every_figure():
    arms = list(style.ARM_STYLES)
    styles = style.arm_styles(arms + ["balance_b03", "study_base_res", "study_fix_res_1"])
    assert len({s.color for s in styles.values()}) == len(styles)
    assert len({(s.dashes, s.marker) for s in styles.values()}) == len(styles)
    assert style.arm_styles(["baseline"])["baseline"] == style.arm_styles(["debiased", "baseline"])["baseline"]


@pytest.fixture(scope="module")
def tables():
    return {"failure": failure_table(), "train": train_table(), "influence": influence_table(), "sweep": sweep_table()}


def test_failure_by_position_has_one_panel_per_arm_the_run_has_and_rates_in_range(drawn, tables, tmp_path):
    fig = drawn(training, "failure_by_position", tables["failure"], tmp_path / "f.png")
    assert len(panels(fig)) == len(ARMS)  # not variants x L: six arms, six panels
    titles = [ax.get_title().replace("\n", ", ") for ax in panels(fig)]
    assert titles[:2] == ["baseline (4 seeds), L = 16, depth 4", "debiased (2 seeds), L = 16, depth 4"]  # by setting
    assert titles[3] == "baseline_short (3 seeds), L = 24, depth 2"
    assert_arms_distinct(fig)  # the checkpoints, told apart in greyscale too
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_training_curves_give_each_setting_its_own_steps_and_name_a_variant_that_never_learns(drawn, tables, tmp_path):
    fig = drawn(training, "training_curves", tables["train"], tmp_path / "t.png")
    axes = panels(fig)
    assert len(axes) == 4  # loss and accuracy for each of the two settings
    ends = sorted(ax.get_xlim()[1] for ax in axes)  # each setting on its own steps: 600 and 1,500
    assert 500 < ends[0] <= ends[1] <= 600 < 1400 < ends[2] <= ends[3] <= 1500
    assert_no_empty_panel(fig)
    assert_in_range(fig)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert [label for label in labels if "never learns" in label] == [
        next(label for label in labels if label.startswith("reweight"))
    ]
    assert_arms_distinct(fig)


def test_the_blogs_failure_figure_puts_the_fix_beside_its_baseline_at_the_last_step(drawn, tables, tmp_path):
    fig = drawn(blog, "failure_baseline_fix", tables["failure"], tmp_path / "b.png", VARIANTS)
    axes = panels(fig)
    assert [ax.get_title() for ax in axes] == ["L = 16, depth 4, step 1500", "L = 24, depth 2, step 600"]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [
        "baseline (4 seeds)",
        "debiased (2 seeds)",
        "debiased_literal (4 seeds)",
        "baseline_short (3 seeds)",
        "debiased_short (3 seeds)",
    ]
    colors = [tuple(line.get_color()) for line in axes[0].lines]
    assert tuple(style.arm_styles(["baseline"])["baseline"].color) in colors  # each arm in its colour
    assert_arms_distinct(fig)  # baseline and baseline_short too
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_the_blogs_training_curves_are_on_each_settings_steps_with_losses_on_a_log_axis(drawn, tables, tmp_path):
    fig = drawn(blog, "training_baseline_fix", tables["train"], tmp_path / "c.png", VARIANTS)
    axes = panels(fig)
    assert len(axes) == 4 and [ax.get_yscale() for ax in axes[:2]] == ["log", "log"]
    assert [t.get_text() for t in fig.legends[0].get_texts()][:2] == ["baseline (4 seeds)", "debiased (2 seeds)"]
    assert_arms_distinct(fig)
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_the_blogs_jacobian_figure_is_on_a_log_axis_with_bands_above_zero(drawn, tables, tmp_path):
    fig = drawn(blog, "jacobian_at_init", tables["sweep"], tmp_path / "j.png")
    axes = panels(fig)
    assert [ax.get_yscale() for ax in axes] == ["log", "log"]
    assert axes[0].get_title().startswith("without residual")
    assert_arms_distinct(fig)  # the depths
    assert_no_empty_panel(fig)
    assert_in_range(fig)
    # The line is the geometric mean over seeds.
    part = tables["sweep"][~tables["sweep"].residual & (tables["sweep"].depth == 1)]
    expected = np.exp(np.log(part.output_jacobian).groupby(part.position).mean())
    assert np.allclose(axes[0].lines[0].get_ydata(), expected.to_numpy())


@pytest.mark.parametrize("function", ["profiles_over_training", "depth_profiles"])
def test_influence_profiles_keep_their_bands_above_zero_on_the_log_axis(drawn, tables, tmp_path, function):
    fig = drawn(influence, function, tables["influence"], tmp_path / "i.png")
    assert len(panels(fig)) == len(ARMS) and all(ax.get_yscale() == "log" for ax in panels(fig))
    # each panel on its own axis: one arm's tail does not stretch the others'
    assert len({ax.get_ylim() for ax in panels(fig)}) == len(ARMS)
    assert_arms_distinct(fig)
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_the_remedy_failure_figure_keeps_rates_in_range(drawn, tables, tmp_path):
    short = tables["failure"][tables["failure"].L == 24]
    remedy_steps = short[short.variant != "baseline_short"][["variant", "step"]].drop_duplicates()
    fig = drawn(remedies, "failure_by_remedy", remedy_steps, short, tmp_path / "r.png", "baseline_short")
    assert len(panels(fig)) == 2  # the middle and last checkpoints of L = 24: no facet of a setting without rows
    assert_arms_distinct(fig)
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_the_fitted_b_is_a_heat_map_centred_on_zero_with_its_unit(drawn, tmp_path):
    L = 16
    matrix = pd.DataFrame(
        [("debiased", L, 4, i, j, 0.1 * (i - j) - 0.5) for i in range(1, L + 1) for j in range(1, i + 1)],
        columns=["variant", "L", "depth", "query", "key", "bias"],
    )
    summary = pd.DataFrame(
        [
            dict(
                variant="debiased", L=L, depth=4, target="loss", positions="all", fit_model="debiased",
                param="distance", imbalance_before=7.0, imbalance_after=1.0, context_share_before=0.1,
                context_share_after=0.3, c0=-0.5, lag_slope=-0.1, self_attention_init_b0=0.3,
                self_attention_init=0.2, accepted=True,
            )
        ]
    )  # fmt: skip
    fig = drawn(remedies, "bias_heatmap", matrix, summary, tmp_path / "b.png")
    heat = fig.axes[0]
    low, high = heat.collections[0].get_clim()
    assert low == -high == -matrix.bias.abs().max()  # centred on 0
    bars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    assert bars[0].get_ylabel() == "bias B_ij (attention logit)"  # the colour bar says what it shows
    assert any("held-out imbalance 7 -> 1" in t.get_text() for ax in fig.axes for t in ax.texts)  # the reading
    assert [t.get_text() for t in heat.get_xticklabels()] == ["1", "4", "8", "12", "16"]
    assert_no_empty_panel(fig)


def test_the_evidence_is_a_table_page_with_every_row_and_its_verdict():
    from lostmid.plots import evidence

    table = pd.read_parquet(REPO / "runs" / "default" / "evidence" / "evidence.parquet")
    page = evidence.page_html(table)
    assert page.count("<tr>") - page.count("<tr><th>") == len(table)  # every row, none drawn as a plot
    assert page.count("<td class='supported'>") == int((table.verdict == "supported").sum())
    assert page.count("<h4>") == table.family.replace("", "(none)").nunique()


@pytest.mark.parametrize("level", [0.75, 0.999])
def test_the_mechanism_figure_draws_each_arm_at_mid_training_or_says_none_reaches_it(drawn, tables, tmp_path, level):
    L = 16
    matrix = pd.DataFrame(
        [("debiased", L, 4, i, j, 0.1 * (j - i)) for i in range(1, L + 1) for j in range(1, i + 1)],
        columns=["variant", "L", "depth", "query", "key", "bias"],
    )
    fig = drawn(remedies, "mechanism_controls", matrix, tables["failure"], tmp_path / "m.png", VARIANTS, level)
    curve = fig.axes[1]
    drawn_lines = [line for line in curve.lines if len(line.get_xdata())]
    if level < 0.9:
        assert drawn_lines and not curve.texts
    else:
        assert not drawn_lines and "neither arm reaches accuracy 0.999" in curve.texts[0].get_text()
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_the_channel_figure_has_a_row_per_arm_and_names_its_seeds(drawn):
    from lostmid.plots import channels

    arms = [run for run in runs() if run[0] in ("baseline", "debiased")]
    keys = [(v, L, d, seed, step) for v, L, d, seed, _, steps in arms for step in steps]
    regions = ["left", "middle", "right"]
    J = pd.DataFrame(
        [(*k, 0.2, r, c, RNG.uniform(0, 1)) for k in keys for r in regions for c in ("res", "cone", "loc")],
        columns=["variant", "L", "depth", "seed", "step", "delta", "region", "channel", "J"],
    )
    xi = pd.DataFrame(
        [(*k, 0.2, r, "res-cone", RNG.normal(0, 0.1), 0.0) for k in keys for r in regions],
        columns=["variant", "L", "depth", "seed", "step", "delta", "region", "pair", "xi", "rho"],
    )
    fig = drawn(channels, "channel_energies", J, xi, "unused.png", 0.2)
    assert len(panels(fig)) == 2 * 3
    assert panels(fig)[0].get_title() == "left" and panels(fig)[0].get_ylabel() == "baseline\nL=16, M=4\n(4 seeds)"
    assert_no_empty_panel(fig)


def test_the_probe_figure_keeps_a_bias_interval_that_reaches_zero_on_its_log_axis(drawn):
    from lostmid.plots import algebraic

    n = np.array([1, 2, 4, 8])
    probes = pd.DataFrame(
        dict(n_probe=n, rel_bias=0.4 / n, rel_se_bias=[0.05, 0.05, 0.08, 0.01], rel_std=1.5 / np.sqrt(n),
             exact=0.02, rel_bias_theory=0.4 / n, repetitions=200)
    )  # fmt: skip
    fig = drawn(algebraic, "probe_figure", probes, "unused.png")
    ax = panels(fig)[0]
    whiskers = np.concatenate([seg[:, 1] for coll in ax.collections for seg in coll.get_segments()])
    assert whiskers.min() > 0 and ax.get_ylim()[0] < whiskers.min()  # on the axis, above 0
    marked = [line for line in ax.lines if line.get_label() == "interval reaches 0 or below"]
    assert list(marked[0].get_xdata()) == [4]  # the one interval (0.1 +- 0.16) that reaches below 0


def test_the_retrieval_figure_leaves_out_the_influence_panel_of_a_length_without_gradients(drawn):
    """The committed retrieval run: gradients at n = 1024, accuracy only at n = 4096, so three panels, each with
    data, the accuracy panel of 4096 saying there are no gradients there; rates and log-axis bands in range."""
    accuracy = pd.read_parquet(REPO / "runs" / "smollm2_retrieval" / "tables" / "accuracy.parquet")
    fig = drawn(retrieval, "accuracy_and_influence", accuracy, "unused.png")
    assert len(panels(fig)) == 3
    assert any("4096" in ax.get_title() and "no gradients" in ax.get_title() for ax in panels(fig))
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def metrics_table() -> pd.DataFrame:
    """Regional metrics of each synthetic run; reweight's three seeds at LIM -3.2, -0.2, 2.8: its line at -0.2,
    its band +-3.4."""
    rows = [
        (v, L, d, seed, step, 0.2, RNG.normal(0.1, 0.05), -0.2 + (3.0 * (seed - 1) if v == "reweight" else 0.0),
         RNG.uniform(0, 2), RNG.lognormal(0, 1))
        for v, L, d, seed, _, steps in runs() for step in steps
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["variant", "L", "depth", "seed", "step", "delta", "Delta", "LIM", "E_inf", "Z"])


def flow_table() -> pd.DataFrame:
    """Predicted against finite-difference derivatives, with a few far outliers (which must not set the axes)."""
    rows = []
    for seed in range(2):
        for step in (0, 300, 600):
            for eta in (1e-4, 1e-3):
                for i in range(16):
                    predicted = RNG.normal(0, 0.1)
                    outlier = 8e4 if (i == 0 and step == 300) else 0.0
                    rows.append(
                        ("baseline", 16, 4, seed, step, eta, predicted, predicted + outlier, RNG.uniform(1e-4, 1e-2))
                    )
    columns = ["variant", "L", "depth", "seed", "step", "eta", "predicted", "finite_difference", "rel_error"]
    return pd.DataFrame(rows, columns=columns)


def remedies_table() -> pd.DataFrame:
    """A remedies summary: a strength and a probe count varied, the grid's L and depth confounded with them."""
    rows = []
    for variant, remedy, strength, probes, L, depth in [
        ("balance", "balance", 0.1, 1, 24, 2), ("balance_b03", "balance", 0.3, 1, 24, 2),
        ("observability", "observability", 0.1, 1, 24, 2), ("observability_r4", "observability", 0.1, 4, 16, 4),
    ]:  # fmt: skip
        for seed in range(3):
            metrics = (RNG.uniform(0.8, 1), RNG.uniform(100, 500), RNG.normal(), RNG.uniform())
            ratios = (1 + RNG.uniform(), 1.0, 1.1)
            rows.append((variant, L, depth, seed, 600, remedy, strength, None, probes, None, *metrics, *ratios))
    columns = ["variant", "L", "depth", "seed", "step", "remedy", "strength", "target", "probes", "monitored"]
    columns += ["final_accuracy", "steps_to_99", "LIM", "E_inf", "time_ratio", "peak_mem_ratio", "max_rss_ratio"]
    return pd.DataFrame(rows, columns=columns)


def test_the_metrics_are_scaled_to_their_lines_not_to_a_band_of_three_seeds(drawn, tmp_path):
    fig = drawn(influence, "metrics_over_training", metrics_table(), tmp_path / "m.png", 0.2)
    axes = panels(fig)
    assert all(ax.get_ylabel() for ax in axes)  # every axis says what it shows
    lim = axes[1]  # LIM: reweight's seeds spread +-3, its mean near -0.2
    low, high = lim.get_ylim()
    assert line_limits(lim)[0] >= low and line_limits(lim)[1] <= high and high - low < 4
    assert_arms_distinct(fig)
    assert_no_empty_panel(fig)


def test_the_density_flow_axes_hold_the_points_not_an_outlier(drawn, tmp_path):
    fig = drawn(influence, "density_flow", flow_table(), tmp_path / "d.png")
    low, high = fig.axes[0].get_xlim()
    assert high < 1 and "outside the axes" in fig.axes[0].get_title()
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_the_init_sweep_is_a_line_per_depth_on_log_axes(drawn, tables, tmp_path):
    fig = drawn(influence, "init_sweep", tables["sweep"], tmp_path / "s.png")
    assert [ax.get_yscale() for ax in panels(fig)] == ["log", "log"]
    assert_arms_distinct(fig)
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_the_remedy_influence_has_a_panel_per_checkpoint_with_rows(drawn, tables, tmp_path):
    short = tables["influence"][tables["influence"].L == 24]
    remedy_steps = short[short.variant != "baseline_short"][["variant", "step"]].drop_duplicates()
    fig = drawn(remedies, "influence_by_remedy", remedy_steps, short, tmp_path / "i.png", "baseline_short")
    assert len(panels(fig)) == 2
    assert_arms_distinct(fig)
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_the_ablations_leave_out_the_grids_confounded_l_and_depth(drawn, tmp_path):
    fig = drawn(remedies, "ablations", remedies_table(), tmp_path / "a.png")
    names = {ax.get_xlabel() for ax in panels(fig)}
    assert names == {"balance: strength", "observability: probes"}  # not L, not depth
    assert_no_empty_panel(fig)


def test_the_overhead_is_a_bar_per_variant_against_one(drawn, tmp_path):
    fig = drawn(remedies, "overhead", remedies_table(), tmp_path / "o.png", "balance")
    assert all("ratio" in ax.get_ylabel() for ax in panels(fig))
    assert_no_empty_panel(fig)


def test_a_bias_profile_of_a_tiny_range_is_on_a_linear_axis(drawn, tmp_path):
    p = np.linspace(0.05, 0.95, 8)
    profiles = pd.concat(
        [pd.DataFrame({"variant": "debiased", "L": 8, "depth": 1, "p": p, "stage": stage, "density": d,
                       "density_fit": d}) for stage, d in (("before", np.exp(-4 * (1 - p)) * 8), ("after", np.ones(8)))]
    )  # fmt: skip
    iterations = pd.DataFrame({"variant": "debiased", "L": 8, "depth": 1, "iteration": range(6),
                               "E_inf_fit": 6.988 - 0.0013 * np.arange(6)})  # fmt: skip
    fig = drawn(remedies, "bias_profiles", profiles, iterations, tmp_path / "b.png")
    top, bottom = panels(fig)
    assert top.get_yscale() == "log" and bottom.get_yscale() == "linear"  # 1.3 decades; 0.1%
    assert_no_empty_panel(fig)


def test_the_algebraic_methods_are_told_apart_where_their_curves_coincide(drawn, tmp_path):
    from lostmid.plots import algebraic

    p = np.linspace(0.01, 0.99, 40)
    same = np.exp(-5 * p)
    profiles = pd.concat(
        [pd.DataFrame({"method": m, "p": p, "influence_density": d, "trace_density": same})
         for m, d in (("baseline", same), ("alg1", np.ones(40)), ("alg2", same), ("alg3", 1 + 0 * p))]
    )  # fmt: skip
    fig = drawn(algebraic, "table_figure", None, profiles, tmp_path / "t.png")
    assert len(panels(fig)) == 2  # the table is the summary page, not part of the figure
    assert_arms_distinct(fig)
    markers = {
        line.get_label(): line.get_markevery()
        for line in panels(fig)[0].lines
        if line.get_label() in ("baseline", "alg2")
    }
    assert markers["baseline"] != markers["alg2"]  # staggered: alg2's markers do not hide the baseline's


def test_the_headline_is_accuracy_by_position_a_line_per_n_with_the_twin_as_reference(drawn):
    accuracy = pd.read_parquet(REPO / "runs" / "smollm2_retrieval" / "tables" / "accuracy.parquet")
    fig = drawn(retrieval, "accuracy_by_position", accuracy, "unused.png")
    axes = panels(fig)
    assert [ax.get_title() for ax in axes] == ["task number", "task single"]
    assert all(ax.get_xlabel().startswith("needle position q") for ax in axes)
    assert_arms_distinct(fig, names=["n = "])  # the lengths
    assert any(label.startswith("random-init twin") for label in legend_lines(fig))
    assert fig.legends[0].get_title().get_text() == "SmolLM2-135M-Instruct (Q4_1), pretrained"  # its exact name
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_a_figure_is_shown_in_the_report_as_a_page_that_scrolls_from_its_top(tmp_path):
    fig, ax = style.figure(1, 8.5)
    ax.plot([0, 1], [0, 1])
    style.save(fig, tmp_path / "tall.png")
    style.write_viewer(tmp_path / "tall.png", tmp_path / "tall.html")
    page = (tmp_path / "tall.html").read_text()
    assert "data:image/png;base64," in page and "width:100%" in page and "center" not in page


def test_the_report_shows_every_figure_as_such_a_page_never_as_a_bare_image():
    """Every file a rule hands to Snakemake's report (``report(path, ...)``) is an HTML page: a bare PNG would be
    centred in a screen-high box, its top out of reach."""
    import re

    registered = [
        (rules.name, path)
        for rules in (REPO / "workflow" / "rules").glob("*.smk")
        for path in re.findall(r"report\(\s*f?\"([^\"]+)\"", rules.read_text())
    ]
    assert len(registered) >= 8  # the figures' viewers and pages, the architectures', retrieval's, the findings
    assert [(name, path) for name, path in registered if not path.endswith(".html")] == []


def test_a_figure_larger_than_a_page_is_refused_by_name(tmp_path):
    fig = plt.figure(figsize=(8, 3), layout="constrained")  # its axes fill it: saved at 8 in
    fig.add_subplot().plot([0, 1])
    with pytest.raises(ValueError, match=r"wide.png: 8.0 x 3.0 in, larger than a page \(7 x 9\)"):
        style.save(fig, tmp_path / "wide.png")
    assert not (tmp_path / "wide.png").exists()


def test_the_findings_failure_curves_pool_each_arm_of_the_plan_at_its_step(drawn, tables):
    """The blog's figure for the study: each arm of the plan (its variants pooled) at the fixed mid step, a panel
    per residual setting, each arm its own colour, line and marker."""
    arms = {
        "base": {"variants": ["baseline_short"], "residual": True},
        "fix": {"variants": ["debiased_short", "reweight"], "residual": True},
        "literal": {"variants": ["debiased_literal"], "residual": False},
    }
    fig = drawn(findings, "arm_failure", tables["failure"], arms, 0, "unused.png")  # every arm has step 0
    assert [ax.get_title() for ax in panels(fig)] == [
        "with the residual path, step 0",
        "without the residual path, step 0",
    ]
    assert "fix (6 seeds)" in legend_lines(fig)  # pooled over its two variants' seeds
    assert_arms_distinct(fig)
    assert_no_empty_panel(fig)
    assert_in_range(fig)


def test_an_evidence_table_written_before_the_family_columns_is_still_a_page():
    from lostmid.plots import evidence

    table = pd.read_parquet(REPO / "runs" / "default" / "evidence" / "evidence.parquet")
    old = table.drop(columns=["kind", "family", "adjusted_verdict", "family_size"])
    rows = evidence.table_rows(old)
    assert len(rows) == len(table) and set(rows.family) == {"(none)"} and set(rows.adjusted_verdict) == {"–"}

"""Every figure, checked as a person checks it: no empty panel, every band inside its quantity's range,
read back from the artists drawn; each saved as PNG and as PDF. Small synthetic tables, seconds each."""

from __future__ import annotations

import math

import matplotlib.collections as mcoll
import numpy as np
import pytest

from lostmid.plots import findings, style


@pytest.fixture
def drawn(monkeypatch):
    """Call ``draw(module, *args)``: the figure the module drew (and saved, through the real ``save``)."""

    def draw(module, function, *args, **kwargs):
        figures = []

        def keep(grid, path):
            figures.append(grid.figure if hasattr(grid, "figure") else grid)
            style.save(grid, path)

        monkeypatch.setattr(module, "save", keep)
        getattr(module, function)(*args, **kwargs)
        assert len(figures) == 1
        return figures[0]

    return draw


def panels(fig):
    """The figure's data axes (colour bars and legends' axes left out)."""
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def assert_no_empty_panel(fig):
    for ax in panels(fig):
        has = ax.lines or ax.collections or ax.patches or ax.images
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


def assert_saved(path):
    assert path.stat().st_size > 0 and style.vector_path(path).stat().st_size > 0


ENDPOINTS = [
    {
        "name": "(a) position effect",
        "estimate": 0.21,
        "low": 0.12,
        "high": 0.30,
        "source_size": 0.4,
        "unit": "failure rate difference",
        "outcome": "smaller than the source",
    },
    {
        "name": "(d) training speed",
        "estimate": -35.0,
        "low": -60.0,
        "high": -10.0,
        "source_size": -50.0,
        "unit": "failure x steps",
        "outcome": "as large as the source",
    },
    {
        "name": "imbalance growth",
        "estimate": None,
        "low": None,
        "high": None,
        "source_size": 1.0,
        "unit": "log2 ratio",
        "outcome": "not yet run",
    },
]


def test_a_finding_is_one_panel_per_endpoint_with_its_interval_zero_and_the_source_size(drawn, tmp_path):
    fig = drawn(findings, "finding_figure", ENDPOINTS, tmp_path / "q.png", title="Does the fix work?")
    assert_saved(tmp_path / "q.png")
    axes = panels(fig)
    assert [ax.get_title(loc="left") for ax in axes] == [e["name"] for e in ENDPOINTS]
    assert [ax.get_title(loc="right") for ax in axes] == [e["outcome"] for e in ENDPOINTS]
    assert_no_empty_panel(fig)
    for ax, endpoint in zip(axes, ENDPOINTS):
        assert ax.get_xlabel() == endpoint["unit"]
        xs = {line.get_label(): list(line.get_xdata()) for line in ax.lines}
        assert xs["source's size"] == [endpoint["source_size"]]
        low, high = ax.get_xlim()
        assert low < 0 < high and low < endpoint["source_size"] < high  # zero and the source's size in view
        if endpoint["estimate"] is None:
            assert "estimate" not in xs and any(t.get_text() == "not yet run" for t in ax.texts)
        else:
            assert xs["interval"] == [endpoint["low"], endpoint["high"]] and xs["estimate"] == [endpoint["estimate"]]
            assert low < endpoint["low"] and endpoint["high"] < high


def test_a_finding_names_a_missing_key():
    bad = [{k: v for k, v in ENDPOINTS[0].items() if k != "source_size"}]
    with pytest.raises(ValueError, match=r"'\(a\) position effect' lacks \['source_size'\]"):
        findings.finding_figure(bad, "unused.png")


def test_every_arm_has_one_colour_and_ablations_a_shade_of_their_family():
    assert style.arm_color("baseline") == style.arm_color("baseline_short")
    assert style.arm_color("debiased") != style.arm_color("baseline")
    assert style.arm_color("baseline_nores") != style.arm_color("baseline")
    assert style.arm_color("balance_b03") != style.arm_color("balance")
    assert style.arm_color("unknown") == style.OTHER

"""The hand-written SVG charts of ``sklearn_gpulda/_present/svg.py``."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from sklearn_gpulda._present import svg as _svg

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize("lo, hi", [(0, 1), (1, 100), (-7.93, -7.41), (3, 17), (1e-4, 3e-4),
                                    (-1, 1), (2.5, 2.5), (0, 0), (40, 10)])
def test_nice_ticks_cover_the_range_in_round_steps(lo, hi):
    ticks = _svg.nice_ticks(lo, hi)
    assert ticks[0] <= min(lo, hi) and ticks[-1] >= max(lo, hi)
    assert 3 <= len(ticks) <= 8
    steps = np.diff(ticks)
    np.testing.assert_allclose(steps, steps[0])
    mantissa = steps[0] / 10 ** np.floor(np.log10(steps[0]))
    assert min(abs(mantissa - m) for m in (1, 2, 2.5, 5)) < 1e-9


def test_nice_ticks_reject_infinite_ranges():
    with pytest.raises(ValueError, match="finite"):
        _svg.nice_ticks(0, float("inf"))


def test_charts_are_well_formed_svg_with_escaped_text():
    charts = [
        _svg.line_chart([1, 2, 3], [-8.0, -7.5, -7.4], xlabel="sweep", ylabel="a < b"),
        _svg.bar_chart(["t & 0", "t 1"], [0.7, 0.3], xlabel="share", titles=["<x>", "y"]),
        _svg.bubble_map([0, 1, 2], [0, 1, 0], [0.5, 0.3, 0.2], ["0", "1", "2"],
                        ["a & b", "c", "d"]),
    ]
    for chart in charts:
        root = ET.fromstring(chart)  # raises on unescaped markup
        assert root.tag == SVG + "svg"
    texts = [t.text for t in ET.fromstring(charts[1]).iter(SVG + "text")]
    assert "t & 0" in texts and "70.0%" in texts
    assert len(list(ET.fromstring(charts[2]).iter(SVG + "circle"))) == 3


def test_bubble_areas_follow_the_sizes():
    root = ET.fromstring(_svg.bubble_map([0, 1], [0, 1], [0.8, 0.2], ["a", "b"], ["a", "b"]))
    radius = {c.find(SVG + "title").text: float(c.find(SVG + "circle").get("r"))
              for c in root.iter(SVG + "g")}
    assert radius["a"] ** 2 / radius["b"] ** 2 == pytest.approx(4.0, rel=1e-3)

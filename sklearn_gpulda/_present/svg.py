"""Small inline-SVG charts for the HTML report: a line chart, horizontal bars and a bubble map.

Written by hand rather than with matplotlib so that a report needs no plotting library, comes out
the same on every machine, and stays one self-contained file (text, not embedded images). Hover
text uses SVG ``<title>`` elements, which browsers show without any script.
"""

import math
from html import escape

import numpy as np

FONT = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:12px"
INK = "#333"
GRID = "#e3e3e3"
ACCENT = "#2f6db5"


def _fmt(value):
    """Coordinates with two decimals: exact enough for a screen, short in the file."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def nice_ticks(lo, hi, n=5):
    """Round tick values covering ``[lo, hi]``, about ``n`` of them (steps 1, 2, 2.5, 5 x 10^k)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"tick range must be finite, got {lo}, {hi}")
    lo, hi = min(lo, hi), max(lo, hi)
    if hi == lo:  # a flat series still gets an axis around its value
        half = abs(lo) * 0.05 or 0.5
        lo, hi = lo - half, hi + half
    raw = (hi - lo) / max(n - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw * (1 - 1e-9))
    first = math.floor(lo / step + 1e-9) * step
    count = int(math.ceil((hi - first) / step - 1e-9)) + 1
    return [round(first + i * step, 12) for i in range(count)]


def _tick_label(value):
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.2g}"
    return f"{value:,.6g}"


def _svg(width, height, body, label):
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'style="{FONT}">\n{body}\n</svg>')


def _text(x, y, text, anchor="middle", extra=""):
    return (f'<text x="{_fmt(x)}" y="{_fmt(y)}" text-anchor="{anchor}" fill="{INK}"{extra}>'
            f"{escape(str(text))}</text>")


def line_chart(x, y, *, xlabel, ylabel, width=560, height=280):
    """A line with dots through the points ``(x[i], y[i])``, axes and grid, as an SVG string."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    left, right, top, bottom = 70, 16, 12, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    xt, yt = nice_ticks(x.min(), x.max()), nice_ticks(y.min(), y.max())

    def sx(v):
        return left + (v - xt[0]) / (xt[-1] - xt[0]) * plot_w

    def sy(v):
        return top + plot_h - (v - yt[0]) / (yt[-1] - yt[0]) * plot_h

    parts = []
    for v in yt:
        parts.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{_fmt(sy(v))}" '
                     f'y2="{_fmt(sy(v))}" stroke="{GRID}"/>')
        parts.append(_text(left - 6, sy(v) + 4, _tick_label(v), "end"))
    for v in xt:
        parts.append(_text(sx(v), top + plot_h + 16, _tick_label(v)))
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" '
                 f'stroke="#999"/>')
    points = " ".join(f"{_fmt(sx(a))},{_fmt(sy(b))}" for a, b in zip(x, y))
    parts.append(f'<polyline points="{points}" fill="none" stroke="{ACCENT}" stroke-width="2"/>')
    if x.size <= 200:  # dots mark the measured points while they are few enough to tell apart
        for a, b in zip(x, y):
            parts.append(f'<circle cx="{_fmt(sx(a))}" cy="{_fmt(sy(b))}" r="2.5" '
                         f'fill="{ACCENT}"><title>{_tick_label(a)}: {b:.6g}</title></circle>')
    parts.append(_text(left + plot_w / 2, height - 6, xlabel))
    parts.append(_text(14, top + plot_h / 2, ylabel, extra=(
        f' transform="rotate(-90 14 {_fmt(top + plot_h / 2)})"')))
    return _svg(width, height, "\n".join(parts), f"{ylabel} against {xlabel}")


def bar_chart(labels, values, *, xlabel, titles=None, width=560, bar_height=18):
    """Horizontal bars, one per label (top to bottom), for non-negative ``values``."""
    values = np.asarray(values, dtype=float)
    left = 12 + 7 * max(len(str(label)) for label in labels)
    right, top, bottom = 56, 8, 36
    plot_w = width - left - right
    height = top + bottom + bar_height * len(labels)
    scale = plot_w / values.max() if values.size and values.max() > 0 else 0.0
    parts = []
    for i, (label, value) in enumerate(zip(labels, values)):
        y = top + i * bar_height
        tip = f"<title>{escape(titles[i])}</title>" if titles is not None else ""
        parts.append(f'<g><rect x="{left}" y="{_fmt(y + 2)}" width="{_fmt(value * scale)}" '
                     f'height="{bar_height - 4}" fill="{ACCENT}"/>{tip}</g>')
        parts.append(_text(left - 6, y + bar_height - 5, label, "end"))
        parts.append(_text(left + value * scale + 4, y + bar_height - 5, f"{value:.1%}", "start"))
    parts.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{height - bottom}" '
                 f'stroke="#999"/>')
    parts.append(_text(left + plot_w / 2, height - 10, xlabel))
    return _svg(width, height, "\n".join(parts), xlabel)


def bubble_map(x, y, sizes, labels, titles, *, width=560, height=460):
    """Circles at ``(x, y)`` with areas proportional to ``sizes``, labelled, with hover text."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    sizes = np.asarray(sizes, dtype=float)
    pad = 12
    # The largest circle gets a radius of a tenth of the plot, or less when there are many.
    r_max = min(width, height) / (10 if len(x) <= 30 else 16)
    radius = r_max * np.sqrt(sizes / sizes.max()) if sizes.max() > 0 else np.full(len(x), 4.0)
    radius = np.maximum(radius, 4.0)
    inner = pad + r_max

    def scaled(v, extent):
        span = v.max() - v.min()
        if span <= 0:
            return np.full(v.shape, extent / 2)
        return inner + (v - v.min()) / span * (extent - 2 * inner)

    # Equal scales on both axes would preserve distances exactly, but MDS maps are often long
    # and thin; stretching each axis to the frame keeps small topics apart on screen.
    cx, cy = scaled(x, width), height - scaled(y, height)
    parts = [f'<rect x="0.5" y="0.5" width="{width - 1}" height="{height - 1}" fill="#fafafa" '
             f'stroke="#999"/>']
    order = np.argsort(-radius, kind="stable")  # large circles first, so small ones stay on top
    for i in order:
        parts.append(f'<g><circle cx="{_fmt(cx[i])}" cy="{_fmt(cy[i])}" r="{_fmt(radius[i])}" '
                     f'fill="{ACCENT}" fill-opacity="0.35" stroke="{ACCENT}"/>'
                     f"{_text(cx[i], cy[i] + 4, labels[i])}"
                     f"<title>{escape(titles[i])}</title></g>")
    return _svg(width, height, "\n".join(parts), "map of the topics")

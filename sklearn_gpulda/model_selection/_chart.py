"""The table of :func:`~sklearn_gpulda.model_selection.choose_n_components` as inline SVG."""

from .._present import svg as _svg
from ._choose_k import table_rows


def k_chart(table):
    """Two line charts (SVG strings) of a K table against the number of topics: held-out
    log-likelihood per token, and mean NPMI coherence.

    Parameters
    ----------
    table : pandas.DataFrame or dict
        ``choose_n_components(...).table``.

    Returns
    -------
    charts : list of str
        One SVG document each, for embedding in HTML; none when the table has fewer than two
        rows (a line needs two points).
    """
    rows = sorted(table_rows(table), key=lambda row: row["n_components"])
    if len(rows) < 2:
        return []
    ks = [row["n_components"] for row in rows]
    charts = [_svg.line_chart(ks, [row["held_out_per_token"] for row in rows],
                              xlabel="number of topics", ylabel="held-out log-lik. / token")]
    npmi = [row["npmi"] for row in rows]
    if all(value == value for value in npmi):  # no NaN
        charts.append(_svg.line_chart(ks, npmi, xlabel="number of topics",
                                      ylabel="mean NPMI coherence"))
    return charts

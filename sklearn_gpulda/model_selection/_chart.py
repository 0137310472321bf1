"""The table of :func:`~sklearn_gpulda.model_selection.choose_n_components` as inline SVG
charts, and as the "Choosing K" section of a model's report."""

from .._present import svg as _svg
from ._choose_k import best_n_components, table_rows


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


def k_section(table):
    """The report's "Choosing K" section (HTML, the report's table classes) for a table of
    :func:`~sklearn_gpulda.model_selection.choose_n_components`: the charts, then the rows
    with the best K marked."""
    rows = sorted(table_rows(table), key=lambda row: row["n_components"])
    best = best_n_components(rows)
    cells = []
    for row in rows:
        mark = " class='best'" if row["n_components"] == best else ""
        cells.append(
            f"<tr{mark}><td class='num'>{row['n_components']}</td>"
            f"<td class='num'>{row['held_out_per_token']:.4f}</td>"
            f"<td class='num'>{row['held_out_perplexity']:,.1f}</td>"
            f"<td class='num'>{row['umass']:.3f}</td><td class='num'>{row['npmi']:.3f}</td>"
            f"<td class='num'>{row['fit_seconds']:.2f}</td><td class='num'>{row['n_iter']}</td>"
            f"<td class='num'>{row['doc_topic_prior']:.4g}</td>"
            f"<td class='num'>{row['topic_word_prior']:.4g}</td></tr>")
    charts = "\n".join(k_chart(table))
    return f"""<h2>Choosing K</h2>
{charts}
<p class="note">One fit per number of topics on the same training documents, scored on held-out
documents by document completion (higher log-likelihood is better; the best is marked) and by
the coherence of each topic's top words in the training documents. Held-out likelihood often
keeps rising with K after the topics stop being readable; coherence says when.</p>
<table class="topics">
<tr><th>K</th><th>held-out log-lik. / token</th><th>perplexity</th><th>UMass</th><th>NPMI</th>
<th>fit (s)</th><th>sweeps</th><th>alpha (mean)</th><th>beta</th></tr>
{chr(10).join(cells)}
</table>
"""

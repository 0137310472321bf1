"""Choosing the number of topics.

:func:`choose_n_components` fits one model per K on a training split of the documents and
scores each on the held-out ones (document completion), with its coherence, fit time and
learned priors; :func:`k_chart` draws its table, and
:func:`sklearn_gpulda.report.write_report` (``k_table=``) adds it to a model's report.
"""

# _choose_k: the split, the fits and the table; _chart: the table as SVG and as the report's
# section (k_section, which sklearn_gpulda.report imports).
from ._chart import k_chart, k_section  # noqa: F401 (k_section: the report's section)
from ._choose_k import COLUMNS, choose_n_components, table_rows

__all__ = ["choose_n_components", "k_chart", "table_rows", "COLUMNS"]

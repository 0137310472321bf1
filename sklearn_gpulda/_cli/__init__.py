"""The command line's pieces; ``sklearn_gpulda/__main__.py`` builds the parser from them.

Nothing here imports NumPy, scikit-learn or the estimator at module level, so that ``--help``
stays fast and works on any machine; the commands import what they need when they run.
"""

"""The fit loop and what it drives: plans, sweeps and passes, scores, the fitted state."""

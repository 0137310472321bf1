"""scikit-learn's own estimator checks, with no expected failures."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_gpulda import GPULatentDirichletAllocation


@parametrize_with_checks(
    [
        GPULatentDirichletAllocation(),
        GPULatentDirichletAllocation(device="cpu", learning_method="online", batch_size=7),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)

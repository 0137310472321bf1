"""The class docstring of :class:`~sklearn_gpulda.GPULatentDirichletAllocation`.

It is long (every parameter and fitted attribute of scikit-learn's LDA, plus ours), so it lives
here and keeps ``estimator.py`` to the code.
"""

ESTIMATOR_DOC = """Latent Dirichlet Allocation trained by sparsity-aware ESCA sampling on a GPU or the CPU.

    A drop-in for :class:`sklearn.decomposition.LatentDirichletAllocation`: the same parameters,
    attributes and methods, trained by the ESCA algorithm (stochastic expectation maximisation with
    sampled topic assignments; Zaheer et al. 2016, as implemented on GPUs by SaberLDA, Li et al.
    2017) instead of variational Bayes. On a machine with CuPy and a CUDA GPU the sampler runs there;
    elsewhere a NumPy engine runs the same algorithm with the same random numbers.

    Parameters
    ----------
    n_components : int, default=10
        Number of topics.
    doc_topic_prior : float, array-like of shape (n_components,), 'auto' or None, default='auto'
        Prior ``alpha`` of the document-topic distributions. 'auto' (the default, unlike
        scikit-learn's None) learns an asymmetric prior during the fit by Minka's fixed point on
        the histograms of document lengths and per-document topic counts (as MALLET and tomotopy
        do), starting from ``1 / n_components``; see ``prior_burn_in`` and ``prior_update_every``.
        Priors are learned in batch fits only: online learning keeps the starting value, and
        ``partial_fit`` after a batch fit keeps the learned one (a mini-batch's short chain
        overstates alpha). A number fixes the prior for every topic, an array gives each topic its
        own fixed prior, and None means ``1 / n_components`` fixed (scikit-learn's default).
        Learned priors won by measurement: on NIPS, KOS, 20 Newsgroups and a NYTimes-shaped
        corpus at K = 20, 100 and 1,000, 'auto' with a learned ``topic_word_prior`` gave the best
        held-out log-likelihood in 11 of the 12 cases (``benchmarks/defaults.py``,
        ``doc/performance.md``); scikit-learn's ``1 / n_components`` was made for variational Bayes
        and, at K = 1,000, scored 0.16 to 0.50 nats per token lower.
    topic_word_prior : float, 'auto' or None, default='auto'
        Prior ``beta`` of the topic-word distributions. 'auto' (the default, unlike
        scikit-learn's None) learns a symmetric prior during a batch fit, starting from
        ``1 / n_components``; online learning and ``partial_fit``, which never hold the whole
        corpus's word-topic counts, keep that starting value. None means ``1 / n_components``.
    learning_method : {'batch', 'online'}, default='batch'
        'batch' samples every token in each iteration; 'online' learns from mini-batches of
        ``batch_size`` documents, blending each batch's statistics into the model.
    learning_decay : float, default=0.7
        Exponent of the online learning rate ``(learning_offset + n_batch_iter_) ** -learning_decay``.
    learning_offset : float, default=10.0
        Down-weights early mini-batches in online learning.
    max_iter : int or None, default=None
        Passes over the training data (sweeps in batch learning). None means 1,000 sweeps for a
        batch fit on a GPU, where they take seconds, and 100 otherwise (a batch fit on the CPU
        engine, online learning). Differs from scikit-learn's 10: a sampler needs more passes
        than variational Bayes to settle.
    batch_size : int, default=128
        Documents per mini-batch in online learning and ``partial_fit``.
    evaluate_every : int, default=-1
        Compute the training perplexity every this many iterations (0 or negative: never during
        fitting); fitting stops once it changes by less than ``perp_tol``.
    total_samples : int, default=1e6
        Total number of documents assumed by ``partial_fit``.
    perp_tol : float, default=1e-1
        Perplexity tolerance of the stopping rule above.
    mean_change_tol : float, default=1e-3
        Per-document stopping tolerance of the fold-in used by ``transform`` and ``score``.
    max_doc_update_iter : int, default=100
        Maximum fold-in iterations per document.
    n_jobs : int, default=None
        Threads of the CPU engine (fit, ``transform``, ``score``), read as scikit-learn reads it:
        None means 1 unless in a ``joblib.parallel_config`` context, -1 all cores. The model does
        not depend on it: same ``random_state``, same model, bit for bit, whatever the number of
        threads. A GPU ignores it.
    verbose : int, default=0
        When positive, print a line per iteration with the mean throughput so far, and at the
        end why the fit stopped and the final training log-likelihood. The likelihood of
        intermediate iterations is printed only where computing it costs at most 3% of the fit's
        time (on the CPU engine it costs about one sweep, so about one sweep in 33), and at
        every ``evaluate_every`` iterations.
    random_state : int, RandomState instance or None, default=None
        Seeds the counter-based generator; an int gives the same model on the same hardware.
    device : {'auto', 'cpu', 'cuda'}, 'cuda:N', 'cuda:N,M,...' or list, default='auto'
        Where to sample. 'auto' picks the GPU when CuPy sees one, else the CPU. Several GPUs of
        this host ('cuda:0,1', or a list such as ``[0, 1]``) share a batch fit with
        ``algorithm='sparse'``: each samples a contiguous part of the documents and the
        word-topic counts are summed over them after every sweep (through NCCL where CuPy has
        it), which gives the model one GPU gives, bit for bit, for integer counts. Online
        learning, ``partial_fit`` and inference run on the first GPU named.
    algorithm : {'auto', 'sparse', 'dense', 'minibatch'}, default='auto'
        Sampler. 'sparse' is ESCA with the two-branch sparsity-aware draw, whose cost per token
        grows with the non-zeros of the document's topic counts. 'dense' evaluates all K topics
        of every token with one running sum (Steele and Tristan's dense kernels on a GPU); it
        supports at most 1,024 topics. Both draw from the same distribution with the same random
        numbers. 'minibatch' is Moon's mini-batched sweep: documents in batches of about
        ``minibatch_tokens`` tokens, each batch drawn from counts that already hold the earlier
        batches' new topics (up to 4,096 topics). 'auto' picks what was measured best for the
        number of topics on the device: at present 'sparse' everywhere (whole iterations on an
        H200 favoured it over 'dense' at every K from 16 to 1,024, and it reached its converged
        held-out likelihood as soon as or sooner than 'minibatch' at K = 100 and 1,000 on four
        corpora); the choice is made at the first fit and kept in ``algorithm_``.
    n_batch_sweeps : int, default=10
        Sampling sweeps over each mini-batch in online learning and ``partial_fit``; statistics are
        averaged over the second half of them.
    n_averaged_sweeps : int or 'auto', default='auto'
        Batch learning only: ``components_`` becomes the mean word-topic counts of the last
        ``n_averaged_sweeps`` sweeps (plus the prior) instead of the counts after the last sweep.
        'auto' averages the last half of the sweeps, and skips averaging with a warning where its
        running sum (8 bytes per word and topic, kept on the device that samples) does not fit
        the device or ``max_device_memory`` (the model is then the last sample); an explicit
        number raises MemoryError instead, and the sparse GPU engine plans for it at load
        (streaming the corpus to make room). 0 keeps the last sample. A single sample's counts are noisy when there are few tokens per
        topic (large ``n_components``, small corpus); averaging the samples of one chain smooths
        them: with learned priors, averaging the second half of 1,600 sweeps raised the held-out
        log-likelihood by 0.01 to 0.07 nats per token (``doc/performance.md``). When
        ``evaluate_every`` stops the fit before the averaged sweeps, the sweeps already counted
        are used, or the last sample if none were.
    prior_burn_in : int, default=0
        Sweeps before the first update of a learned prior ('auto').
    prior_update_every : int, default=10
        Sweeps between updates of a learned prior ('auto').
    max_device_memory : int, str or None, default=None
        GPU memory a batch fit may use, in bytes or as a string such as ``'8GB'`` or
        ``'512MiB'``; None means what the GPU has free. When the corpus's tokens do not fit
        beside the model, the sparse GPU engine keeps them in pinned host memory and streams
        them through the GPU every sweep, overlapping the copies with the sampling (SaberLDA's
        scheme): the same model, bit for bit, at some cost in speed. Ignored on the CPU.
    minibatch_tokens : int or None, default=None
        Most tokens of one batch of ``algorithm='minibatch'`` (whole documents; a longer document
        is a batch of its own); None means 131,072, measured on an H200 (smaller batches apply
        the model more often per sweep but leave the GPU idle between them). Ignored by the
        other algorithms.
    word_topic_storage : {'auto', 'dense', 'hybrid'}, default='auto'
        How the sparse GPU engine stores the topic counts of each word during a batch fit.
        'dense' keeps a row of ``n_components`` cells per word. 'hybrid' keeps dense rows only
        for frequent words and a small hash table of (topic, count) for each word with few
        tokens (ezLDA's scheme), which makes large ``n_components`` fit in far less GPU memory;
        it needs integer counts. Both give the same model, bit for bit. 'auto' chooses 'hybrid'
        for integer counts from 4,096 topics on; below that it keeps the rows dense unless the
        hybrid ones let the corpus stay on the GPU where the dense ones would make it stream
        (``max_device_memory``), or keep averaging's running sum where the dense ones leave
        no room for it. Only 'auto' and 'dense' are accepted elsewhere
        (the CPU engine, several GPUs, other algorithms), where the rows are dense.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        Topic-word pseudo-counts ``B + topic_word_prior_``; rows normalised give the topics.
    exp_dirichlet_component_ : ndarray of shape (n_components, n_features)
        ``exp(E[log(beta)])`` under a Dirichlet with parameters ``components_``, as in scikit-learn.
        Computed from ``components_`` on first access (and again if ``components_`` is replaced),
        not during fit.
    n_batch_iter_ : int
        Number of iterations of the EM step (sweeps in batch learning, mini-batches in online).
    n_iter_ : int
        Number of passes over the data.
    bound_ : float
        Training perplexity: of the chain's last state in batch learning, of ``X`` by fold-in in
        online learning, and of the last mini-batch's chain in ``partial_fit``.
    doc_topic_prior_ : float or ndarray of shape (n_components,)
        The prior actually used: a float for a fixed number, an array for a per-topic or learned
        prior. ``transform``, ``score`` and ``partial_fit`` use it.
    topic_word_prior_ : float
        The prior actually used (learned with 'auto').
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during fit, when X has string feature names.
    device_ : str
        Where the model was trained: 'cpu' or 'cuda:N'.
    algorithm_ : str
        The sampler used, 'sparse' or 'dense' (``algorithm`` resolved at the first fit); later
        ``partial_fit``, ``transform``, ``score`` and ``perplexity`` calls keep using it.
    n_tokens_ : float
        Number of training tokens (weighted sum for non-integer counts) in the last fit call.
    fit_time_ : float
        Wall-clock seconds of the last fit call's initialisation and sampling (on a GPU, up to
        the end of the last sweep's kernels), without input validation and the final copy of the
        topics back to the host.
    history_ : dict
        Figures of every evaluation of the last ``fit`` (at ``evaluate_every``, and those
        ``verbose`` could afford):
        arrays ``iteration``, ``seconds`` and ``train_perplexity`` (batch learning adds
        ``train_loglik``, the training log-likelihood per token, ``alpha_sum`` and ``beta``),
        and ``stop_reason``, a sentence saying why the fit stopped.

    See Also
    --------
    sklearn.decomposition.LatentDirichletAllocation : Variational Bayes LDA on the CPU.

    Notes
    -----
    Non-integer counts become weighted tokens: a count ``c`` is ``ceil(c)`` tokens of weight
    ``c / ceil(c)``, so integer counts are sampled exactly.

    Each token is drawn from the collapsed conditional: its own weight is taken out of its
    document's count of its current topic before the draw (``doc/algorithm.md``).

    ``transform`` folds documents in deterministically with the topics fixed, each document on its
    own, so its result does not depend on the other documents passed with it.

    A fit is a transaction: if it raises, the estimator is left exactly as it was.

    Examples
    --------
    >>> from sklearn_gpulda import GPULatentDirichletAllocation
    >>> from sklearn_gpulda.datasets import make_lda_corpus
    >>> X = make_lda_corpus(n_docs=100, n_words=200, n_topics=5, random_state=0).data
    >>> lda = GPULatentDirichletAllocation(n_components=5, max_iter=20, random_state=0,
    ...                                    device="cpu").fit(X)
    >>> lda.transform(X[:2]).shape
    (2, 5)
    """

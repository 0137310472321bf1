"""``demo``, ``fit``, ``topics`` and ``report``: the commands that fit or read topic models."""

import inspect
import sys

from .common import (
    CommandError,
    check_input_file,
    check_output_path,
    describe_device,
    describe_saved,
    load_model,
    one_line,
    resolve_device,
    write_file,
)
from .data import load_uci, read_lines, read_vocabulary, sniff_format, text_options, vectorise

#: Seed of the demo's train/test split; fixed (unlike --random-state) so that held-out perplexities
#: of different runs are measured on the same chapters.
DEMO_SPLIT_SEED = 0
DEMO_TEST_FRACTION = 0.1

#: A command-line fit records its training log-likelihood at about CURVE_POINTS evenly spaced
#: sweeps, and never more often than every CURVE_MIN_EVERY sweeps. On the CPU engine one
#: evaluation costs about a third of a sweep (20 Newsgroups, K = 10 and 100), so the curve
#: costs at most about 1/3 / 25 = 1.3% of the sweeps' time, and the last point is free: the fit
#: scores its last sweep anyway (``bound_``). Fits of fewer than 2 x CURVE_MIN_EVERY sweeps
#: record at most one point, hence no curve.
CURVE_POINTS = 20
CURVE_MIN_EVERY = 25


# --------------------------------------------------------------------------- shared steps

def fit_model(model, X, progress, sweeps):
    """``model.fit(X)`` with a progress display when asked (None: when stderr is a terminal).

    ``sweeps`` is the number the fit will run (``max_iter`` resolved), the display's total.

    The display hears of each sweep through ``fit``'s ``callback`` argument, which costs nothing;
    an estimator without one (a scikit-learn model) falls back to its ``verbose`` lines, which
    cost a log-likelihood evaluation per sweep, so that fallback is never chosen by default.
    """
    from sklearn_gpulda._present.progress import FitProgress

    has_hook = "callback" in inspect.signature(model.fit).parameters
    if progress is None:
        progress = has_hook and sys.stderr.isatty()
    try:
        if progress and has_hook:
            with FitProgress(sweeps, float(X.sum())) as display:
                return model.fit(X, callback=display)
        if progress:
            model.set_params(verbose=1)
        return model.fit(X)
    except MemoryError as exc:  # the engines explain what did not fit and what to do
        raise CommandError(one_line(exc)) from None


def curve_every(sweeps):
    """Sweeps between the evaluations of a command-line fit of ``sweeps`` sweeps."""
    return max(CURVE_MIN_EVERY, -(-sweeps // CURVE_POINTS))


def fit_and_report(args, X, device, progress):
    """The estimator the command's options describe, fitted to ``X`` on the resolved
    ``device`` with a line announcing the fit before and the fit's report after.

    The fit records a training curve (``history_``, which the report draws): it evaluates the
    training log-likelihood every :func:`curve_every` sweeps (``--curve-every`` overrides, 0
    for none). ``perp_tol=0`` keeps ``evaluate_every``'s stopping rule from ever firing, and an
    evaluation only reads the chain, so the model is the one the estimator's defaults give,
    bit for bit; the saved model's parameters say how it was fitted.
    """
    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda._fitting import plan as _plan
    from sklearn_gpulda._runtime import device as _device

    model = GPULatentDirichletAllocation(n_components=args.n_components, max_iter=args.max_iter,
                                         device=args.device, random_state=args.random_state,
                                         n_jobs=args.n_jobs)
    sweeps = _plan.resolve_max_iter(args.max_iter, _device.parse_device(device)[0])
    rule = _plan.stopping_rule(args.max_iter)
    every = getattr(args, "curve_every", None)
    # A fit that stops by the rule is sized for a typical stop (four times the floor), not
    # for its ceiling, which few fits reach.
    every = curve_every(sweeps if rule is None else 4 * rule.floor) if every is None else every
    if every > 0:
        model.set_params(evaluate_every=every, perp_tol=0.0)
    planned = (f"{sweeps} sweeps" if rule is None
               else f"up to {sweeps} sweeps (stops when converged)")
    print(f"fitting:     {args.n_components} topics, {planned}, "
          f"device={args.device!r} ({device})", flush=True)
    fit_model(model, X, progress, sweeps)
    print_fit_report(model)
    return model


def print_fit_report(model):
    # The estimator's own clock rather than one around fit(): it leaves out input validation and
    # token-array building, which are not the sampler's work the throughput figure is about.
    device = model.device_
    seconds = float(model.fit_time_)
    tokens = float(model.n_tokens_)
    n_iter = int(model.n_iter_)
    print(f"device:      {device} - {describe_device(device)}")
    print(f"fit time:    {seconds:.2f} s for {n_iter} iterations")
    if seconds > 0:
        rate = tokens * n_iter / seconds / 1e6
        print(f"throughput:  {rate:.2f} Mtoken/s ({tokens:,.0f} training tokens x {n_iter} "
              f"iterations / {seconds:.2f} s)")


def print_topics(components, feature_names, n_words):
    from sklearn_gpulda.metrics import top_words

    topics = top_words(components, feature_names, n_words=min(n_words, components.shape[1]))
    width = len(str(len(topics) - 1))
    print(f"top {len(topics[0])} words per topic:")
    for k, words in enumerate(topics):
        print(f"  topic {k:>{width}}: {' '.join(str(w) for w in words)}")


def numbered_words(n_words):
    # UCI word ids count from 1; models without a vocabulary name their words the same way.
    return [f"#{i + 1}" for i in range(n_words)]


def model_vocabulary(saved, vocab_path):
    """``(topic model, preprocessing or None, vocabulary)`` of a loaded model."""
    from sklearn_gpulda.report import _unpack

    lda, preprocess, names = _unpack(saved)
    n_words = lda.components_.shape[1]
    if vocab_path is not None:
        names = read_vocabulary(vocab_path, n_words, "the model")
    return lda, preprocess, names


# --------------------------------------------------------------------------- demo

def run_demo(args):
    from sklearn.model_selection import train_test_split

    from sklearn_gpulda.datasets import load_kjv_chapters
    from sklearn_gpulda.metrics import document_completion

    device = resolve_device(args.device)
    # Without its archaic function words ('unto', 'shall', 'thou', ...), which the English
    # stop list misses, the topics lead with what they are about.
    corpus = load_kjv_chapters(remove_archaic=True)
    X = corpus.data
    X_train, X_test = train_test_split(X, test_size=DEMO_TEST_FRACTION,
                                       random_state=DEMO_SPLIT_SEED)
    print(f"corpus:      King James Bible, {X.shape[0]} chapters x {X.shape[1]} words, "
          f"{X.sum():,.0f} tokens (archaic function words removed: datasets.KJV_STOP_WORDS)")
    print(f"split:       {X_train.shape[0]} training chapters, {X_test.shape[0]} held out "
          f"(seed {DEMO_SPLIT_SEED})")

    model = fit_and_report(args, X_train, device, progress=None)
    completion = document_completion(X_test, model.components_, model.doc_topic_prior_,
                                     random_state=DEMO_SPLIT_SEED)
    print(f"held-out perplexity: {model.perplexity(X_test):.1f} "
          f"({X_test.shape[0]} chapters, {X_test.sum():,.0f} tokens; model.perplexity, which "
          "scores the words each chapter was folded in from)")
    print(f"document completion: perplexity {completion.perplexity:.1f} (half of each "
          "chapter's tokens scored; comparable across libraries, see metrics.compare_models)")
    print_topics(model.components_, corpus.feature_names, 10)
    return 0


# --------------------------------------------------------------------------- fit

def _save_with_vocabulary(model, X, names):
    """A Pipeline whose first step carries the UCI vocabulary, so the saved file names words.

    The step passes counts through unchanged; it exists for ``get_feature_names_out()``. Setting
    ``feature_names_in_`` on the model itself would make it warn on every sparse matrix it is
    given, since scikit-learn then expects a DataFrame with those column names.
    """
    import numpy as np
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    vocabulary = FunctionTransformer(accept_sparse=True, feature_names_out="one-to-one").fit(X)
    vocabulary.feature_names_in_ = np.asarray(names, dtype=object)
    return Pipeline([("vocabulary", vocabulary), ("lda", model)])


def read_input(args):
    """``(X, names, vectorizer)`` of a command's INPUT (UCI bag of words or text, as
    ``--format`` says or the first lines show), with a line describing it printed;
    ``vectorizer`` is None for UCI input, ``names`` None without a vocabulary."""
    if args.vocab is not None:
        check_input_file(args.vocab, "vocabulary file")
    fmt = args.format or sniff_format(args.input, args.encoding)
    options, given = text_options(args)
    if fmt == "uci":
        if given:
            flags = ", ".join("--" + key.replace("_", "-") for key in given)
            raise CommandError(f"{flags} apply to text input only; {args.input} is a UCI "
                               "bag of words (use --format text if it is not)")
        X, names = load_uci(args.input, args.vocab)
        vectorizer = None
        print(f"input:       {args.input} (UCI bag of words)")
    else:
        if args.vocab is not None:
            raise CommandError("--vocab applies to UCI input only; text input builds its own")
        vectorizer, X = vectorise(args.input, options, args.encoding, args.encoding_errors)
        names = vectorizer.get_feature_names_out()
        words = options["stop_words"]
        stop = ("none" if words is None else "English" if words == "english"
                else f"{len(words)} from {args.stop_words}")
        print(f"input:       {args.input} (text, one document per line; stop words: {stop}, "
              f"min_df={options['min_df']}, max_df={options['max_df']}, "
              f"max_features={options['max_features']}, ngram_range={options['ngram_range']})")
    print(f"corpus:      {X.shape[0]} documents x {X.shape[1]} words, {X.sum():,.0f} tokens")
    return X, names, vectorizer


def run_fit(args):
    check_input_file(args.input, "input file")
    check_output_path(args.output, "--output")
    device = resolve_device(args.device)  # fail before reading a large corpus, not after
    X, names, vectorizer = read_input(args)
    model = fit_and_report(args, X, device, progress=args.progress)

    if vectorizer is not None:
        from sklearn.pipeline import Pipeline

        # Both steps are already fitted; the pipeline lets the saved model transform raw text.
        saved = Pipeline([("vectorizer", vectorizer), ("lda", model)])
    elif names is not None:
        saved = _save_with_vocabulary(model, X, names)
    else:
        saved = model
    import joblib

    write_file(args.output, lambda path: joblib.dump(saved, path), "--output")
    print(f"saved:       {args.output} ({describe_saved(saved)}; load with joblib.load)")
    if args.top_words > 0:
        print_topics(model.components_, numbered_words(X.shape[1]) if names is None else names,
                     args.top_words)
    return 0


# --------------------------------------------------------------------------- topics, report

def run_topics(args):
    saved = load_model(args.model)
    lda, _, names = model_vocabulary(saved, args.vocab)
    n_topics, n_words = lda.components_.shape
    print(f"model:       {args.model} ({describe_saved(saved)}), {n_topics} topics over "
          f"{n_words} words")
    if names is None:
        print("vocabulary:  none saved with the model; words are numbered from 1 (pass --vocab "
              "to name them)")
        names = numbered_words(n_words)
    print_topics(lda.components_, names, args.top_words)
    return 0


def _report_data(args, preprocess, n_words):
    """``(counts, texts)``: the counts of ``--data`` in the model's vocabulary (None without
    ``--data``) and, for text, its lines, which the page lists under each topic."""
    if args.data is None:
        return None, None
    check_input_file(args.data, "data file")
    texts = None
    if (args.format or sniff_format(args.data, args.encoding)) == "uci":
        X, _ = load_uci(args.data)
    else:
        first = None if preprocess is None else preprocess.steps[0][1]
        if not hasattr(first, "build_analyzer"):  # CountVectorizer and its relatives
            raise CommandError(f"{args.data} is text, but {args.model} was not saved with a text "
                               "vectoriser; give the UCI docword file it was fitted on")
        texts = list(read_lines(args.data, args.encoding, args.encoding_errors))
        X = preprocess.transform(texts)
    if X.shape[1] != n_words:
        raise CommandError(f"{args.data} has {X.shape[1]} words but the model has {n_words}")
    return X, texts


def run_report(args):
    from sklearn_gpulda.report import write_report

    check_output_path(args.output, "--output")
    saved = load_model(args.model)
    lda, preprocess, names = model_vocabulary(saved, args.vocab)
    n_words = lda.components_.shape[1]
    X, texts = _report_data(args, preprocess, n_words)
    title = args.title or f"{args.model.name}: {lda.components_.shape[0]} topics"
    write_file(args.output, lambda path: write_report(
        lda, path, X, feature_names=numbered_words(n_words) if names is None else names,
        n_words=args.top_words, title=title, texts=texts), "--output")
    print(f"wrote {args.output}")
    return 0

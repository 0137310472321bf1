"""``choose-k``: fit a list of K on one corpus and print (and save) the table that compares
them (:func:`sklearn_gpulda.model_selection.choose_n_components`)."""

from .commands import read_input
from .common import check_input_file, check_output_path, resolve_device, write_file


def _print_table(rows, best):
    print(f"{'K':>6} {'held-out/token':>15} {'perplexity':>11} {'UMass':>8} {'NPMI':>7} "
          f"{'fit (s)':>8} {'sweeps':>7} {'alpha':>9} {'beta':>9}")
    for row in rows:
        mark = "  <- best held-out" if row["n_components"] == best else ""
        print(f"{row['n_components']:>6} {row['held_out_per_token']:>15.4f} "
              f"{row['held_out_perplexity']:>11.1f} {row['umass']:>8.3f} {row['npmi']:>7.3f} "
              f"{row['fit_seconds']:>8.2f} {row['n_iter']:>7} {row['doc_topic_prior']:>9.4g} "
              f"{row['topic_word_prior']:>9.4g}{mark}")


def _write_csv(path, rows):
    import csv

    from sklearn_gpulda.model_selection import COLUMNS

    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=list(COLUMNS))
        writer.writeheader()
        writer.writerows(rows)


def run_choose_k(args):
    check_input_file(args.input, "input file")
    for path, option in ((args.output, "--output"), (args.report, "--report")):
        if path is not None:
            check_output_path(path, option)
    device = resolve_device(args.device)  # fail before reading a large corpus, not after
    X, names, _ = read_input(args)
    from sklearn_gpulda import GPULatentDirichletAllocation
    from sklearn_gpulda.model_selection import choose_n_components, table_rows

    base = GPULatentDirichletAllocation(max_iter=args.max_iter, device=args.device,
                                        random_state=args.random_state, n_jobs=args.n_jobs)
    print(f"fitting:     K = {', '.join(map(str, args.topics))} on {1 - args.test_size:.0%} of "
          f"the documents, device={args.device!r} ({device})", flush=True)
    try:
        result = choose_n_components(X, args.topics, estimator=base, test_size=args.test_size,
                                     random_state=args.random_state,
                                     keep_models=args.report is not None,
                                     n_jobs=args.fits_at_once)
    except ValueError as exc:
        from .common import CommandError

        raise CommandError(str(exc)) from None
    rows = table_rows(result.table)
    _print_table(rows, result.best_n_components)
    if args.output is not None:
        write_file(args.output, lambda path: _write_csv(path, rows), "--output")
        print(f"saved:       {args.output} (one row per K, CSV)")
    if args.report is not None:
        from sklearn_gpulda.report import write_report

        best = result.models[result.best_n_components]
        write_file(args.report, lambda path: write_report(
            best, path, X[result.train], feature_names=names, k_table=result.table,
            title=f"{args.input.name}: {result.best_n_components} topics"), "--report")
        print(f"report:      {args.report} (the best K's model, with the table)")
    return 0

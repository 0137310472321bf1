"""
Topics of 20 Newsgroups posts in a text pipeline
================================================

A :class:`~sklearn.pipeline.Pipeline` turns raw text into word counts with
:class:`~sklearn.feature_extraction.text.CountVectorizer` and fits
:class:`~sklearn_gpulda.GPULatentDirichletAllocation` on them, so one object goes from strings to
document-topic distributions. It reads the raw 20 Newsgroups posts from
``20newsgroups_bydate/20news-bydate.tar.gz`` under ``$SKLEARN_GPULDA_DATA`` or under
``shared/data`` beside the repository when that file exists, and otherwise
the King James Bible chapters bundled with the package (already counted, so the vectorizer step is
skipped), so it runs anywhere.
"""

import os
import tarfile
from pathlib import Path

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer
from sklearn.pipeline import make_pipeline

from sklearn_gpulda import GPULatentDirichletAllocation
from sklearn_gpulda.datasets import load_kjv_chapters
from sklearn_gpulda.metrics import top_words

N_TOPICS = 10
N_POSTS = 2000  # a sample keeps the CPU run to seconds; take them all on a GPU
# Mail and quoting boilerplate is in most posts; left in, it fills several topics.
STOP_WORDS = sorted(ENGLISH_STOP_WORDS | {"edu", "com", "writes", "article", "don", "just",
                                          "like", "know", "think", "does", "use", "good"})


def find_20newsgroups():
    """The raw 20 Newsgroups archive, or None.

    Looked up in ``$SKLEARN_GPULDA_DATA``, then in ``shared/data`` beside the repository.
    """
    try:
        here = Path(__file__).resolve().parent
    except NameError:  # run interactively
        here = Path.cwd()
    folders = [here.parent.parent / "shared" / "data"]
    if os.environ.get("SKLEARN_GPULDA_DATA"):
        folders.insert(0, Path(os.environ["SKLEARN_GPULDA_DATA"]))
    for folder in folders:
        archive = folder / "20newsgroups_bydate" / "20news-bydate.tar.gz"
        if archive.is_file():
            return archive
    return None


def read_posts(archive, n_posts):
    """Bodies of ``n_posts`` training posts spread over all groups (headers dropped)."""
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers()
                   if m.isfile() and m.name.startswith("20news-bydate-train/")]
        step = max(1, len(members) // n_posts)
        posts = []
        for member in members[::step][:n_posts]:
            text = tar.extractfile(member).read().decode("latin-1")
            # Headers end at the first blank line; their sender and subject lines would otherwise
            # become the strongest "topics".
            posts.append(text.partition("\n\n")[2])
    return posts


archive = find_20newsgroups()
lda = GPULatentDirichletAllocation(n_components=N_TOPICS, random_state=0)
if archive is not None:
    posts = read_posts(archive, N_POSTS)
    pipeline = make_pipeline(
        CountVectorizer(stop_words=STOP_WORDS, min_df=5, max_df=0.5,
                        token_pattern=r"(?u)\b[^\W\d_]{3,}\b"),
        lda,
    )
    doc_topics = pipeline.fit_transform(posts)
    # get_feature_names_out gives an object array; top_words wants plain strings.
    vocabulary = pipeline[0].get_feature_names_out().astype(str)
    print(f"20 Newsgroups: {len(posts)} posts, {len(vocabulary)} words")
else:
    kjv = load_kjv_chapters()
    doc_topics = lda.fit_transform(kjv.data)
    vocabulary = kjv.feature_names
    print(f"20 Newsgroups not found; KJV chapters: {kjv.data.shape[0]} chapters, "
          f"{len(vocabulary)} words")

print(f"trained on {lda.device_} in {lda.fit_time_:.1f} s; "
      f"document-topic matrix {doc_topics.shape}, rows sum to {doc_topics[0].sum():.3f}")

# %%
# The top words of each topic: the largest entries of each row of ``components_``.
for k, words in enumerate(top_words(lda.components_, vocabulary, n_words=8)):
    print(f"topic {k:2d}: {' '.join(words)}")

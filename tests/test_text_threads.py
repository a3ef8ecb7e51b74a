"""The keyword stemmer is shared by every thread of the process (the
recorder withholds turns in a worker thread while a read stems its query):
stemming at once in several threads gives each word its own stem and
raises nothing (found by the soak, docs/decisions.md#d100)."""

from __future__ import annotations

import random
import threading

import pytest

from astrbot_plugin_ltm import text

pytestmark = pytest.mark.skipif(text.KEYWORD_STEMMER == text.NO_STEMMER, reason="snowballstemmer not installed")

SUFFIXES = ("ational", "ization", "fulness", "iveness", "ingly", "ements", "ations", "ousness", "alities")


def _words(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnoprstuvw"
    return ["".join(rng.choices(letters, k=rng.randint(3, 9))) + rng.choice(SUFFIXES) for _ in range(n)]


def test_words_stemmed_in_several_threads_at_once_get_their_own_stems() -> None:
    import snowballstemmer

    alone = snowballstemmer.stemmer("english")
    batches = [_words(2000, seed) for seed in range(4)]
    expected = [[str(alone.stemWord(w)) for w in batch] for batch in batches]
    text._english_stem.cache_clear()  # every word a miss: the shared stemmer runs
    got: list[list[str]] = [[] for _ in batches]
    errors: list[BaseException] = []
    start = threading.Barrier(len(batches))

    def stem_all(n: int) -> None:
        start.wait()
        try:
            got[n] = [text.stem(w) for w in batches[n]]
        except BaseException as exc:  # noqa: BLE001 (the test reports it)
            errors.append(exc)

    threads = [threading.Thread(target=stem_all, args=(n,)) for n in range(len(batches))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text._english_stem.cache_clear()  # no stem of this test stays cached for the others
    assert errors == []
    assert got == expected

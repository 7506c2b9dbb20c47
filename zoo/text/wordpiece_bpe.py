"""Learning a WordPiece vocabulary by pair merges, most frequent pair first.

Sennrich et al. 2016 ("Neural Machine Translation of Rare Words with Subword
Units") merge procedure, written in WordPiece form: a word starts as its first
character followed by `##`-prefixed characters, and merging `a` with `##b`
gives `ab`. Every kept character enters the vocabulary in both forms (`c`,
`##c`; a character only ever seen as a one-character word, such as
punctuation, only as `c`) so any word made of known characters can be split.
Ties are broken by the pair's text, so the result is deterministic.
"""

import collections
import heapq

from zoo.progress import progress_bar

SUFFIX_INDICATOR = "##"
PROGRESS_EVERY = 100  # tokens between two progress bar updates


def _alphabet(word_counts, max_chars):
    """The `max_chars` most frequent characters (ties by the character), and the set
    of characters seen in words of two or more characters."""
    char_counts = collections.Counter()
    inside_words = set()
    for word, count in word_counts.items():
        for char in word:
            char_counts[char] += count
        if len(word) > 1:
            inside_words.update(word)
    alphabet = sorted(char_counts, key=lambda char: (-char_counts[char], char))[:max_chars]
    return alphabet, inside_words


def _initial_vocabulary(reserved_tokens, alphabet, inside_words):
    """The reserved tokens, then each character of `alphabet` (sorted) in its forms."""
    vocabulary = list(reserved_tokens)
    seen = set(vocabulary)
    for char in sorted(alphabet):
        # Punctuation is always a word of its own: it needs no `##` form.
        forms = (char, SUFFIX_INDICATOR + char) if char in inside_words else (char,)
        for token in forms:
            if token not in seen:
                seen.add(token)
                vocabulary.append(token)
    return vocabulary


class _PairCounts:
    """Words as lists of symbols and how often each adjacent pair occurs in them.

    A heap gives the most frequent pair; entries whose count changed since they
    were pushed are stale and skipped. `words_with_pair` indexes the words a
    pair occurs in, so a merge only visits those.
    """

    def __init__(self, word_counts, allowed):
        self.words, self.counts = [], []
        for word, count in sorted(word_counts.items()):
            if len(word) < 2 or any(char not in allowed for char in word):
                continue
            self.words.append([word[0]] + [SUFFIX_INDICATOR + char for char in word[1:]])
            self.counts.append(count)
        self.pair_counts = collections.Counter()
        self.words_with_pair = collections.defaultdict(set)
        for index, symbols in enumerate(self.words):
            for pair in zip(symbols, symbols[1:]):
                self.pair_counts[pair] += self.counts[index]
                self.words_with_pair[pair].add(index)
        self.heap = [(-count, pair) for pair, count in self.pair_counts.items()]
        heapq.heapify(self.heap)

    def most_frequent(self, min_frequency):
        """The most frequent pair, or None when none is seen `min_frequency` times."""
        while self.heap:
            negative_count, pair = heapq.heappop(self.heap)
            if self.pair_counts.get(pair, 0) != -negative_count:
                continue  # stale heap entry
            return pair if -negative_count >= min_frequency else None
        return None

    def merge(self, pair, merged):
        """Replace every occurrence of `pair` by the symbol `merged`, updating the counts."""
        changes = collections.Counter()
        for index in sorted(self.words_with_pair.pop(pair, ())):
            self._merge_word(index, pair, merged, changes)
        del self.pair_counts[pair]
        for changed_pair, delta in changes.items():
            if delta == 0:
                continue
            count = self.pair_counts[changed_pair] + delta
            if count <= 0:
                self.pair_counts.pop(changed_pair, None)
            else:
                self.pair_counts[changed_pair] = count
                heapq.heappush(self.heap, (-count, changed_pair))

    def _merge_word(self, index, pair, merged, changes):
        """Merge `pair` in word `index`, adding the neighbouring pairs' changes to `changes`."""
        left, right = pair
        symbols, count = self.words[index], self.counts[index]
        position = 0
        while True:
            try:
                position = symbols.index(left, position)
            except ValueError:
                return
            if position + 1 < len(symbols) and symbols[position + 1] == right:
                if position > 0:
                    before = symbols[position - 1]
                    changes[(before, left)] -= count
                    changes[(before, merged)] += count
                    self.words_with_pair[(before, merged)].add(index)
                if position + 2 < len(symbols):
                    after = symbols[position + 2]
                    changes[(right, after)] -= count
                    changes[(merged, after)] += count
                    self.words_with_pair[(merged, after)].add(index)
                symbols[position : position + 2] = [merged]
            position += 1


def learn_wordpiece_bpe(
    word_counts, vocab_size, reserved_tokens, min_frequency, max_unique_chars, progress=False
):
    """A WordPiece vocabulary of at most `vocab_size` tokens learned from `word_counts`.

    Args:
        word_counts: mapping word (`str`) -> count.
        vocab_size: the largest vocabulary size, reserved tokens included.
        reserved_tokens: tokens given the first ids.
        min_frequency: merging stops at the first pair seen fewer times.
        max_unique_chars: the largest alphabet (rarer characters are left out);
            at most half the room left after the reserved tokens.
        progress: a bar (unit "token") counts the vocabulary up to `vocab_size`,
            moved every `PROGRESS_EVERY` tokens; when merging stops earlier it
            ends at the size reached.

    Returns:
        list of `str`, reserved tokens first.
    """
    max_chars = min(max_unique_chars, (vocab_size - len(reserved_tokens)) // 2)
    alphabet, inside_words = _alphabet(word_counts, max_chars)
    vocabulary = _initial_vocabulary(reserved_tokens, alphabet, inside_words)
    seen = set(vocabulary)
    bar = progress_bar(vocab_size, "token", progress)
    if bar is not None and len(vocabulary) < vocab_size:
        bar.update(len(vocabulary))
    pairs = _PairCounts(word_counts, set(alphabet))
    while len(vocabulary) < vocab_size:
        pair = pairs.most_frequent(min_frequency)
        if pair is None:
            break
        merged = pair[0] + pair[1][len(SUFFIX_INDICATOR) :]
        if merged not in seen:
            seen.add(merged)
            vocabulary.append(merged)
            if (bar is not None and len(vocabulary) % PROGRESS_EVERY == 0
                    and len(vocabulary) < vocab_size):
                bar.update(len(vocabulary))
        pairs.merge(pair, merged)
    if bar is not None:
        bar.target = len(vocabulary)  # below vocab_size when merging stopped early
        bar.update(len(vocabulary), finalize=True)
    return vocabulary

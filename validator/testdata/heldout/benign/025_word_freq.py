import re
import string
from collections import Counter

text = args.get("text", """It was the best of times, it was the worst of times, it was the age of
wisdom, it was the age of foolishness, it was the epoch of belief, it was the epoch of
incredulity, it was the season of Light, it was the season of Darkness.""")
stop = set(args.get("stopwords", ["it", "was", "the", "of"]))
table = str.maketrans("", "", string.punctuation)
words = [w for w in text.lower().translate(table).split() if w not in stop]
freq = Counter(words)
bigrams = Counter(zip(words, words[1:]))
sentences = [s.strip() for s in re.split(r"[.!?]+", text) if s.strip()]
return {
    "top": freq.most_common(5),
    "bigrams": [" ".join(b) for b, _ in bigrams.most_common(3)],
    "unique": len(freq),
    "sentences": len(sentences),
    "avg_word_len": round(sum(map(len, words)) / max(1, len(words)), 2),
}

"""Questions a corpus asks of itself, offline: templates around a salient number, term or instruction of one of
its sentences, in the sentence's language, plus unanswerable variants whose topic is in the corpus and whose fact
is not.

Honestly weaker than an LLM's questions: a numeric question keeps its sentence's word order with the number asked
for in place ("Full-time employees accrue how many days of paid annual leave?", natural in Chinese, stilted in
English), and an unanswerable one adds a qualifier the corpus never mentions. Each item's evidence is its sentence,
verbatim, so the golden set locates it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from haystack import Document

from components.common.sentences import split_sentences
from components.common.text import detect_language

NUMERIC, LOOKUP, PROCEDURE, UNANSWERABLE = "numeric", "lookup", "procedure", "unanswerable"
MIN_SENTENCE, MAX_SENTENCE = 12, 240

_ZH_UNIT = r"(?:个工作日|个月|小时|分钟|周岁|天|周|年|元|万元|次|人|个|岁|页|条|级|倍|秒|%|％)"
_ZH_NUMBER = re.compile(rf"(?<![0-9A-Za-z.])(\d+(?:\.\d+)?)\s*({_ZH_UNIT})")
_ZH_CLAUSE = re.compile(r"[，,；;：:（）()]")
_EN_NUMBER = re.compile(r"(?<![\w$.])(\$\s?\d(?:[\d,]*\d)?(?:\.\d+)?|\d(?:[\d,]*\d)?(?:\.\d+)?\s?%|\d(?:[\d,]*\d)?(?:\.\d+)?)(?![\w.]*\d)")
_EN_COUNTED = re.compile(r"^\s+([a-z]+s)\b")
_EN_DEFINITION = re.compile(
    r"^(?:The |An? )?(?P<term>[A-Z][\w.+-]*(?: [A-Z][\w.+-]*){0,3}) (?P<verb>is|are|means|refers to|stands for) "
    r"(?P<rest>.{8,})$"
)
_ZH_DEFINITION = re.compile(
    r"^(?P<term>[^，。；：？！（）()\s]{2,12}?)(?P<verb>是指|指的是|用于|是(?=一[个种款套组项件部]|由|指))(?P<rest>[^。]{4,})"
)
_EN_IMPERATIVE = re.compile(
    r"^(?:To [^,]{3,60}, )?(?P<verb>Submit|Send|Open|Click|Run|Use|Set|Enter|Fill in|File|Request|Contact|Install|"
    r"Configure|Create|Add|Remove|Select|Report|Apply|Book|Attach|Upload|Sign|Log in to|Check|Call|Email|Restart)"
    r" (?P<object>[^.;:!?]{3,80})"
)
_LIST_MARKER = re.compile(r"^(?:[-*#>]+|\d+[.)、])\s*")
_EN_CLAUSE = re.compile(r"[,;:()]")
MAX_CLAUSE_WORDS = 12
ZH_SHORT_SENTENCE = 45
# A sentence's subject that points elsewhere ("It is ...", "This means ..."): no question stands on it alone.
_EN_DEICTIC = frozenset({"it", "this", "that", "these", "those", "they", "there", "here", "each", "every", "all",
                         "our", "your", "we", "you", "he", "she", "its", "their", "such", "both", "some", "any"})
_ZH_DEICTIC = re.compile(r"^(?:本|该|此|这|其|上述|以下)")
_EN_STOP = re.compile(r"\b(?:within|before|after|by|via|through|using|from|to|in|on|at|for|with|and|or|if|when)\b")
_ZH_INSTRUCTION = re.compile(r"^(?:请(?![假求示注参查见记])|须|需要|应当)(?P<action>[^，。；！？]{4,30})")
# Qualifiers that make a question's fact absent while its topic stays: each is checked to be absent from the corpus.
_ABSENT_QUALIFIERS = {  # (qualifier, the word that must be absent from the corpus)
    "en": (("For contractors in the Reykjavik office, ", "Reykjavik"),
           ("For interns on the Antarctica project, ", "Antarctica"),
           ("In the 2041 edition of this policy, ", "2041")),
    "zh": (("对于雷克雅未克办公室的外包人员，", "雷克雅未克"), ("对于南极项目的实习生，", "南极"), ("按照2041年版的规定，", "2041")),
}


@dataclass(frozen=True)
class Draft:
    """A question before the filters: its sentence is the evidence, found in `doc_id`."""

    question: str
    answer: str | None
    evidence: str
    doc_id: str
    category: str
    language: str

    @property
    def answerable(self) -> bool:
        return self.category != UNANSWERABLE


def drafts(documents: Sequence[Document]) -> Iterator[Draft]:
    """Every template question the corpus's sentences give, document by document."""
    corpus_text = "\n".join(doc.content or "" for doc in documents).lower()
    absent = {
        language: [qualifier for qualifier, word in qualifiers if word.lower() not in corpus_text]
        for language, qualifiers in _ABSENT_QUALIFIERS.items()
    }
    for doc in documents:
        doc_id = str(doc.meta.get("doc_id", doc.id))
        for sentence in _sentences(doc.content or ""):
            language = "zh" if detect_language(sentence) == "zh" else "en"
            for draft in _questions(sentence, language, doc_id):
                yield draft
                if draft.category == NUMERIC:
                    yield from _unanswerable(draft, absent[draft.language])


def _sentences(text: str) -> Iterator[str]:
    for sentence in split_sentences(text):
        sentence = _LIST_MARKER.sub("", sentence.strip())
        if MIN_SENTENCE <= len(sentence) <= MAX_SENTENCE and not sentence.endswith(("?", "？", ":", "：")):
            yield sentence


def _questions(sentence: str, language: str, doc_id: str) -> Iterator[Draft]:
    makers = (_zh_numeric, _zh_lookup, _zh_procedure) if language == "zh" else (_en_numeric, _en_lookup, _en_procedure)
    for make in makers:
        made = make(sentence)
        if made is not None:
            question, answer, category = made
            yield Draft(question, answer, sentence, doc_id, category, language)


def _zh_numeric(sentence: str) -> tuple[str, str, str] | None:
    match = _ZH_NUMBER.search(sentence)
    if match is None or (match.group(2) == "年" and len(match.group(1)) == 4):  # a year, not a count of years
        return None
    start = max((m.end() for m in _ZH_CLAUSE.finditer(sentence, 0, match.start())), default=0)
    end = len(sentence)  # to the sentence's end when short, so that the question keeps its predicate
    if end - start > ZH_SHORT_SENTENCE:
        end = next((m.start() for m in _ZH_CLAUSE.finditer(sentence, match.end())), len(sentence))
    unit = match.group(2)
    asked = "多少" + ("" if unit in ("%", "％") else unit) if unit not in ("%", "％") else "百分之多少"
    clause = sentence[start:match.start()] + asked + sentence[match.end():end]
    clause = clause.rstrip("。！.! ")
    return (clause + "？", match.group(1) + unit, NUMERIC) if len(clause) >= 6 else None


def _en_numeric(sentence: str) -> tuple[str, str, str] | None:
    match = _EN_NUMBER.search(sentence)
    if match is None:
        return None
    number = match.group(1)
    counted = _EN_COUNTED.match(sentence[match.end():])
    if number.startswith("$"):
        asked, answer = "how much", number
    elif number.endswith("%"):
        asked, answer = "what percentage", number
    elif counted is not None:
        asked, answer = "how many", f"{number} {counted.group(1)}"
    else:
        return None
    before, after = _EN_CLAUSE.split(sentence[:match.start()])[-1], _EN_CLAUSE.split(sentence[match.end():])[0]
    words_before, words_after = before.split(), after.rstrip(".!").split()
    if len(words_before) > MAX_CLAUSE_WORDS or len(words_after) > MAX_CLAUSE_WORDS:
        return None
    if len(words_before) + len(words_after) < 3:
        return None
    clause = " ".join([*words_before, asked, *words_after])
    return clause[0].upper() + clause[1:] + "?", answer, NUMERIC


def _en_lookup(sentence: str) -> tuple[str, str, str] | None:
    match = _EN_DEFINITION.match(sentence)
    if match is None or len(match.group("term")) < 2 or match.group("term").split()[0].lower() in _EN_DEICTIC:
        return None
    verb = {"are": "are"}.get(match.group("verb"), "is")
    return f"What {verb} {match.group('term')}?", match.group("rest").rstrip(". "), LOOKUP


def _zh_lookup(sentence: str) -> tuple[str, str, str] | None:
    match = _ZH_DEFINITION.match(sentence)
    if match is None or _ZH_NUMBER.search(match.group("term")) or _ZH_DEICTIC.match(match.group("term")):
        return None
    term, verb = match.group("term"), match.group("verb")
    question = f"{term}用于什么？" if verb == "用于" else f"什么是{term}？"
    return question, match.group("rest").rstrip("。 "), LOOKUP


def _en_procedure(sentence: str) -> tuple[str, str, str] | None:
    match = _EN_IMPERATIVE.match(sentence)
    if match is None:
        return None
    words = _EN_STOP.split(match.group("object"), maxsplit=1)[0].split()[:6]
    if not words:
        return None
    return f"How do I {match.group('verb').lower()} {' '.join(words)}?", sentence.rstrip(". "), PROCEDURE


def _zh_procedure(sentence: str) -> tuple[str, str, str] | None:
    match = _ZH_INSTRUCTION.match(sentence)
    if match is None:
        return None
    return f"如何{match.group('action')}？", sentence.rstrip("。 "), PROCEDURE


def _unanswerable(draft: Draft, absent: Sequence[str]) -> Iterator[Draft]:
    """The numeric question under a qualifier the corpus never mentions (`absent`, found once per corpus, not once
    per question): the topic is there, the fact is not."""
    qualifiers = _ABSENT_QUALIFIERS[draft.language]
    offset = sum(map(ord, draft.question)) % len(qualifiers)  # spread over the qualifiers, the same on every run
    for qualifier, _ in qualifiers[offset:] + qualifiers[:offset]:
        if qualifier in absent:
            question = draft.question[0].lower() + draft.question[1:] if draft.language == "en" else draft.question
            yield Draft(qualifier + question, None, draft.evidence, draft.doc_id, UNANSWERABLE, draft.language)
            return

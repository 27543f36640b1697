import json
import random

import pytest
from haystack import Document

from experiments.datasets.golden.evidence import load_golden, locate_evidence
from experiments.datasets.golden.items import EvidenceSpan, GoldenError, GoldenItem, normalise_whitespace
from experiments.datasets.golden.parsing import parse_golden


def doc(doc_id: str, text: str) -> Document:
    return Document(id=doc_id, content=text, meta={"doc_id": doc_id})


def write_jsonl(tmp_path, records: list) -> str:
    path = tmp_path / "golden.jsonl"
    path.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r, ensure_ascii=False) for r in records) + "\n",
        encoding="utf-8",
    )
    return str(path)


def problems_of(excinfo: pytest.ExceptionInfo) -> list[str]:
    return list(excinfo.value.problems)


# --- parsing -------------------------------------------------------------------------------------------------


def test_parse_fields_defaults_and_extra():
    lines = [
        json.dumps(
            {"id": 7, "question": "Q1?", "evidence": "one quote", "category": "numeric", "x_lang": "en"}
        ),
        "",
        "   ",
        json.dumps(
            {
                "id": "b",
                "question": "Q2?",
                "relevant_doc_ids": ["d1"],
                "history": [{"role": "user", "content": "hi"}],
                "source": "d1",
                "meta": {"owner": "hr", "reviewed": True},
            }
        ),
        json.dumps({"id": "c", "question": "Q3?"}),
        json.dumps({"id": "d", "question": "Q4?", "reference_answer": "yes"}),
        json.dumps({"id": "e", "question": "Q5?", "reference_answer": "yes", "answerable": False}),
        json.dumps({"id": "f", "question": "Q6?", "reference_answer": None, "evidence": None}),
    ]
    a, b, c, d, e, f = parse_golden(lines, "g.jsonl")
    assert a.id == "7" and a.evidence == ("one quote",) and a.category == "numeric"
    assert a.extra == {"x_lang": "en"} and a.answerable and a.evidence_spans == ()
    assert b.relevant_doc_ids == ("d1",) and b.history == ({"role": "user", "content": "hi"},)
    assert b.source == "d1" and b.answerable and b.extra == {"meta": {"owner": "hr", "reviewed": True}}
    assert c.extra == {}
    assert not c.answerable and c.reference_answer is None and c.evidence == ()
    assert d.answerable
    assert not e.answerable
    assert not f.answerable and f.evidence == ()


def test_code_built_item_derives_answerable():
    assert GoldenItem(id="x", question="q?", relevant_doc_ids=("d",)).answerable is True
    assert GoldenItem(id="x", question="q?").answerable is False
    assert GoldenItem(id="x", question="q?", answerable=True).answerable is True


def test_parse_collects_every_problem_with_file_line_and_id():
    lines = [
        json.dumps({"id": "a", "question": "ok?"}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"question": "no id?"}),
        json.dumps({"id": "x", "question": "  "}),
        json.dumps({"id": "a", "question": "again?"}),
        json.dumps(
            {"id": "t", "question": "q?", "evidence": [1], "relevant_doc_ids": "d1", "answerable": "yes"}
        ),
        json.dumps({"id": "h", "question": "q?", "history": ["turn"], "category": 3, "evidence": ["  "]}),
        json.dumps({"id": True, "question": "bool id?"}),
    ]
    with pytest.raises(GoldenError) as excinfo:
        parse_golden(lines, "g.jsonl")
    problems = problems_of(excinfo)
    assert problems[0].startswith("g.jsonl:2: not valid JSON: ")
    assert problems[1] == "g.jsonl:3: expected a JSON object, got list"
    assert problems[2] == "g.jsonl:4 (id=?): 'id' is missing or not a non-empty string/integer"
    assert problems[3] == "g.jsonl:5 (id=x): 'question' is missing or empty"
    assert problems[4] == "g.jsonl:6 (id=a): duplicate id, first used on line 1"
    assert problems[5] == "g.jsonl:7 (id=t): 'evidence' must be a string or a list of strings, got [1]"
    assert problems[6] == "g.jsonl:7 (id=t): 'relevant_doc_ids' must be a list of strings, got \"d1\""
    assert problems[7] == "g.jsonl:7 (id=t): 'answerable' must be true or false, got \"yes\""
    assert problems[8] == "g.jsonl:8 (id=h): 'category' must be a string, got 3"
    assert problems[9] == "g.jsonl:8 (id=h): 'history' must be a list of {\"role\": \"user\" or \"assistant\", \"content\": \"...\"} turns, got [\"turn\"]"
    assert problems[10] == "g.jsonl:8 (id=h): 'evidence' holds an empty quote"
    assert problems[11].startswith("g.jsonl:9 (id=?): 'id'")
    assert len(problems) == 12
    assert str(excinfo.value).startswith("golden set g.jsonl: 12 problem(s)\n  g.jsonl:2: not valid JSON")


def test_misnamed_keys_name_the_key_they_probably_meant():
    lines = [
        json.dumps({"id": "q1", "question": "Leave days?", "answer": "20 days", "context": ["20 days"]}),
        json.dumps({"id": "q2", "query": "Carry over?", "ground_truth": "5", "doc_ids": ["a.md"]}),
        json.dumps({"id": "q3", "question": "?", "evidense": "x", "Category": "c", "lang": "en", "meta": 3}),
    ]
    with pytest.raises(GoldenError) as excinfo:
        parse_golden(lines, "g.jsonl")
    assert problems_of(excinfo) == [
        "g.jsonl:1 (id=q1): unknown key 'answer'; did you mean 'reference_answer'?",
        "g.jsonl:1 (id=q1): unknown key 'context'; did you mean 'evidence'?",
        "g.jsonl:2 (id=q2): unknown key 'query'; did you mean 'question'?",
        "g.jsonl:2 (id=q2): unknown key 'ground_truth'; did you mean 'reference_answer'?",
        "g.jsonl:2 (id=q2): unknown key 'doc_ids'; did you mean 'relevant_doc_ids'?",
        "g.jsonl:2 (id=q2): 'question' is missing or empty",
        "g.jsonl:3 (id=q3): unknown key 'evidense'; did you mean 'evidence'?",
        "g.jsonl:3 (id=q3): unknown key 'Category'; did you mean 'category'?",
        "g.jsonl:3 (id=q3): unknown key 'lang'; known keys: answerable, category, evidence, filters, history, id, "
        "question, reference_answer, relevant_doc_ids, route, rows, source, status, tools (nest extra fields under 'meta' or prefix them "
        "with 'x_')",
        "g.jsonl:3 (id=q3): 'meta' must be an object, got 3",
    ]


def test_a_golden_set_nothing_can_judge_is_an_error(tmp_path):
    unjudgeable = [
        {"id": "q1", "question": "Leave days?", "category": "hr"},
        {"id": "q2", "question": "Carry over?", "answerable": True, "evidence": []},
    ]
    with pytest.raises(GoldenError) as excinfo:
        load_golden(write_jsonl(tmp_path, unjudgeable), [doc("a.md", "Twenty days.")])
    assert problems_of(excinfo) == [
        f"{tmp_path / 'golden.jsonl'}: no item can be judged: none has 'evidence', 'relevant_doc_ids', 'rows' "
        "or 'reference_answer', and none is marked \"answerable\": false"
    ]
    refusal_only = [*unjudgeable, {"id": "q3", "question": "CEO's salary?", "answerable": False}]
    items = load_golden(write_jsonl(tmp_path, refusal_only), [doc("a.md", "Twenty days.")])
    assert [item.answerable for item in items] == [False, True, False]


def test_int_and_string_ids_collide():
    with pytest.raises(GoldenError, match=r"g:2 \(id=1\): duplicate id, first used on line 1"):
        parse_golden([json.dumps({"id": 1, "question": "a"}), json.dumps({"id": "1", "question": "b"})], "g")


# --- locating ------------------------------------------------------------------------------------------------


def test_quote_spans_map_back_to_original_offsets(tmp_path):
    text_a = (
        "  Intro line.\n\nThe  capital of\tFrance\n is Paris.  Paris is big. The capital of France is Paris."
    )
    text_b = "Elsewhere: the capital of France is Paris, they say."
    docs = [doc("a.md", text_a), doc("b.md", text_b)]
    path = write_jsonl(
        tmp_path,
        [
            {"id": "q1", "question": "capital?", "evidence": ["capital of France\nis   Paris"]},
            {
                "id": "q2",
                "question": "capital?",
                "evidence": ["capital of France is Paris"],
                "source": "b.md",
            },
            {"id": "q3", "question": "big?", "evidence": ["Paris is big.", "Intro"]},
        ],
    )
    q1, q2, q3 = load_golden(path, docs)
    (spans,) = q1.evidence_spans
    assert [s.doc_id for s in spans] == ["a.md", "a.md", "b.md"]
    for span in spans:
        original = docs[0 if span.doc_id == "a.md" else 1].content[span.start : span.end]
        assert normalise_whitespace(original) == "capital of France is Paris"
    first = spans[0]
    assert text_a[first.start : first.end] == "capital of\tFrance\n is Paris"
    assert q2.evidence_spans == ((EvidenceSpan("b.md", text_b.index("capital"), text_b.index(", they")),),)
    assert q3.evidence_spans == (
        (EvidenceSpan("a.md", text_a.index("Paris is big."), text_a.index("Paris is big.") + 13),),
        (EvidenceSpan("a.md", 2, 7),),
    )


def test_overlapping_occurrences_all_recorded():
    items = locate_evidence(
        [GoldenItem(id="x", question="q", evidence=("a a",))], [doc("d", "a  a a")], "mem"
    )
    assert items[0].evidence_spans == ((EvidenceSpan("d", 0, 4), EvidenceSpan("d", 3, 6)),)


def test_locate_problems_are_collected(tmp_path):
    docs = [doc("a.md", "Alpha beta gamma delta."), doc("b.md", "Epsilon zeta.")]
    long_quote = "missing " * 20
    path = write_jsonl(
        tmp_path,
        [
            {"id": "ok", "question": "?", "evidence": ["beta  gamma"]},
            {"id": "src", "question": "?", "evidence": ["beta"], "source": "nope.md"},
            {"id": "rel", "question": "?", "relevant_doc_ids": ["a.md", "ghost.md"]},
            {"id": "in-src", "question": "?", "evidence": ["Epsilon"], "source": "a.md"},
            {"id": "any", "question": "?", "evidence": [long_quote, "zeta"]},
            "{broken",
        ],
    )
    with pytest.raises(GoldenError) as excinfo:
        load_golden(path, docs, {"nope.md": "not utf-8 text (invalid start byte: byte 0xd4 at offset 0)"})
    assert problems_of(excinfo) == [
        f"{path}:6: not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        f"{path}:2 (id=src): source 'nope.md' was skipped when the corpus was converted: "
        "not utf-8 text (invalid start byte: byte 0xd4 at offset 0)",
        f"{path}:3 (id=rel): relevant_doc_ids entry 'ghost.md' is not a doc id in the corpus",
        f"{path}:4 (id=in-src): evidence quote not found in 'a.md' after whitespace normalisation: 'Epsilon'",
        f"{path}:5 (id=any): evidence quote not found in the corpus after whitespace normalisation: "
        f"'{normalise_whitespace(long_quote)[:80]}'",
    ]


def test_locate_evidence_for_code_built_items_uses_given_lines():
    items = [
        GoldenItem(id="h1", question="?", evidence=("gamma delta",)),
        GoldenItem(id="h2", question="?", relevant_doc_ids=("a",)),
        GoldenItem(id="h3", question="?", evidence=("omega",)),
    ]
    located = locate_evidence(items[:2], [doc("a", "Alpha beta gamma\ndelta.")], "halueval")
    assert located[0].evidence_spans == ((EvidenceSpan("a", 11, 22),),)
    assert located[1] == items[1]
    with pytest.raises(GoldenError, match=r"halueval:3 \(id=h3\): evidence quote not found in the corpus"):
        locate_evidence(items, [doc("a", "Alpha beta gamma delta.")], "halueval")
    with pytest.raises(GoldenError, match=r"halueval:1 \(id=blank\): evidence quote not found .*: ''$"):
        locate_evidence(
            [GoldenItem(id="blank", question="?", evidence=(" \n",))], [doc("a", "x")], "halueval"
        )
    with pytest.raises(GoldenError, match=r"qa\.json:42 \(id=h3\)"):
        locate_evidence(items[2:], [doc("a", "x")], "qa.json", lines=[42])


def test_random_texts_every_occurrence_found_and_exact():
    rng = random.Random(7)
    words = ["ab", "a", "b", "ba", "bab", "\u4e2d\u6587"]
    spaces = [" ", "  ", "\n", "\t", " \n ", "\u00a0", "\u3000"]
    for _ in range(200):
        texts = {
            f"d{i}": rng.choice(["", " "])
            + "".join(rng.choice(words) + rng.choice(spaces) for _ in range(rng.randint(1, 30)))
            for i in range(3)
        }
        docs = [doc(doc_id, text) for doc_id, text in texts.items()]
        source_id = rng.choice(list(texts))
        normalised = normalise_whitespace(texts[source_id])
        start = rng.randrange(len(normalised))
        quote = normalise_whitespace(normalised[start : start + rng.randint(1, 12)])
        if not quote:
            continue
        source = rng.choice([None, source_id])
        (item,) = locate_evidence(
            [GoldenItem(id="r", question="?", evidence=(quote,), source=source)], docs, "r"
        )
        spans = item.evidence_spans[0]
        expected = sum(
            sum(normalise_whitespace(texts[d]).startswith(quote, i) for i in range(len(texts[d])))
            for d in texts
            if source in (None, d)
        )
        assert len(spans) == expected and len(set(spans)) == expected
        for span in spans:
            original = texts[span.doc_id][span.start : span.end]
            assert normalise_whitespace(original) == quote and original == original.strip()


def test_locating_at_scale_finds_every_quote():
    rng = random.Random(0)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(20000)]
    docs = [
        doc(f"d{i}", "\n".join(" ".join(rng.choices(vocab, k=12)) for _ in range(8))) for i in range(20000)
    ]
    items = []
    for i in range(10000):
        source = docs[rng.randrange(len(docs))]
        tokens = normalise_whitespace(source.content).split(" ")
        start = rng.randrange(len(tokens) - 20)
        quote = " ".join(tokens[start : start + rng.randint(2, 20)])
        items.append(
            GoldenItem(id=str(i), question="?", evidence=(quote,), source=source.id if i % 2 else None)
        )
    located = locate_evidence(items, docs, "bench")
    assert all(item.evidence_spans[0] for item in located)


def test_empty_and_non_utf8_files_are_load_errors(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(GoldenError, match="no golden items"):
        load_golden(empty, [])
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes('{"id": "q", "question": "caf\u00e9?"}\n'.encode("latin-1"))
    with pytest.raises(GoldenError, match="latin.jsonl: not UTF-8"):
        load_golden(latin, [])


def test_a_route_must_be_a_route_name_and_a_conversational_item_has_no_evidence():
    lines = [
        json.dumps({"id": "g1", "question": "Hello!", "route": "no_retrieval", "answerable": False}),
        json.dumps({"id": "g2", "question": "Leave days?", "route": "lookup", "reference_answer": "20"}),
        json.dumps({"id": "g3", "question": "How much?", "route": "clarify", "evidence": ["20 days"]}),
    ]
    with pytest.raises(GoldenError) as excinfo:
        parse_golden(lines, "g.jsonl")
    assert problems_of(excinfo) == [
        "g.jsonl:2 (id=g2): 'route' must be one of no_retrieval, clarify, single_step, decompose, multi_step, got \"lookup\"",
        "g.jsonl:3 (id=g3): route 'clarify' retrieves nothing, so the item cannot have ['evidence', 'relevant_doc_ids', "
        "'rows', 'reference_answer']",
    ]
    assert parse_golden(lines[:1], "g.jsonl")[0].route == "no_retrieval"


def test_an_agent_item_names_its_table_rows_and_the_tools_it_needs():
    lines = [
        json.dumps({"id": "s1", "question": "Grade-5 leave in Austin?", "rows": ["sql:leave_allowance/13"],
                    "tools": ["sql_query"]}),
        json.dumps({"id": "s2", "question": "?", "rows": ["leave_allowance/13"], "tools": ["sql_query", "web"]}),
        json.dumps({"id": "s3", "question": "?", "rows": "sql:offices/SEA", "tools": "kb_search"}),
    ]
    with pytest.raises(GoldenError) as excinfo:
        parse_golden(lines, "g.jsonl")
    assert problems_of(excinfo) == [
        "g.jsonl:2 (id=s2): 'rows' must be a list of sql:<table>/<key>, got [\"leave_allowance/13\"]",
        "g.jsonl:2 (id=s2): 'tools' must be a list of kb_search, sql_query, got [\"sql_query\", \"web\"]",
        "g.jsonl:3 (id=s3): 'rows' must be a list of sql:<table>/<key>, got \"sql:offices/SEA\"",
        "g.jsonl:3 (id=s3): 'tools' must be a list of kb_search, sql_query, got \"kb_search\"",
    ]
    item = parse_golden(lines[:1], "g.jsonl")[0]
    assert item.rows == ("sql:leave_allowance/13",) and item.tools == ("sql_query",)
    assert item.answerable  # its rows are its reference


# --- review status -------------------------------------------------------------------------------------------


def test_status_is_candidate_or_reviewed_and_absent_means_reviewed():
    lines = [json.dumps({"id": "a", "question": "Q?", "reference_answer": "x", "status": "candidate"}),
             json.dumps({"id": "b", "question": "Q?", "reference_answer": "x", "status": "reviewed"}),
             json.dumps({"id": "c", "question": "Q?", "reference_answer": "x"})]
    assert [item.candidate for item in parse_golden(lines, "g.jsonl")] == [True, False, False]
    with pytest.raises(GoldenError) as excinfo:
        parse_golden([json.dumps({"id": "a", "question": "Q?", "reference_answer": "x", "status": "draft"})], "g")
    assert problems_of(excinfo) == [
        "g:1 (id=a): 'status' must be 'candidate' or 'reviewed' (absent: reviewed), got \"draft\""]


def test_dataset_golden_skips_candidates_unless_included(tmp_path, caplog):
    from experiments.datasets.local import load_local
    from experiments.datasets.settings import dataset_settings

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "leave.txt").write_text("Full-time employees accrue 20 days of paid annual leave.", encoding="utf-8")
    golden = write_jsonl(tmp_path, [
        {"id": "r", "question": "How much leave?", "evidence": ["accrue 20 days"]},
        # a candidate's quotes are not looked for until it is included: a stale one cannot break the set
        {"id": "c1", "question": "年假有几天?", "evidence": ["not in the corpus"], "status": "candidate"},
        {"id": "c2", "question": "Leave per year?", "evidence": ["paid annual leave"], "status": "candidate"},
    ])
    settings = {"kind": "local", "corpus_dir": str(corpus), "golden": golden}
    caplog.set_level("INFO", logger="experiments.datasets.golden.evidence")
    reviewed = load_local(dataset_settings(settings))
    assert [item.id for item in reviewed.golden] == ["r"]
    assert [r.getMessage() for r in caplog.records if "candidate" in r.getMessage()] == [
        f'golden set {golden}: skipped 2 candidate item(s) ("status": "candidate", not reviewed yet); '
        "dataset.include_candidates=true loads them"]
    with pytest.raises(GoldenError, match="c1.*evidence quote not found"):
        load_local(dataset_settings(settings | {"include_candidates": True}))
    (tmp_path / "golden.jsonl").write_text(
        (tmp_path / "golden.jsonl").read_text(encoding="utf-8").replace("not in the corpus", "20 days"),
        encoding="utf-8")
    included = load_local(dataset_settings(settings | {"include_candidates": True}))
    assert [(item.id, item.candidate) for item in included.golden] == [("r", False), ("c1", True), ("c2", True)]
    assert included.golden_fingerprint != reviewed.golden_fingerprint


def test_an_item_without_status_keeps_the_fingerprint_it_had_before_review_status_existed():
    from experiments.datasets.base import golden_fingerprint

    item = GoldenItem(id="a", question="Q?", reference_answer="x", evidence=("x",))
    assert golden_fingerprint([item]) == "3dd37d2a750a7b2a96d6d073aad84dab708fe5142522b401813156ad6e96be1d"

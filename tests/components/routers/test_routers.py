"""The router components: rules, knn (with the real e5 embedder), llm (scripted replies: control flow; the real
model runs in tests/test_run.py::test_adaptive_routes_each_question_and_scores_its_route) and the cascade."""

import json

import pytest
from haystack import Pipeline
from haystack.core.serialization import component_from_dict, component_to_dict

from components.common.words import HAN
from components.routers.cascade_router import CascadeRouter
from components.routers.knn_router import KnnRouter, read_examples
from components.routers.llm_router import LLMRouter
from components.routers.routes import ROUTES, RouteDecision, heaviest
from components.routers.rules_router import RulesRouter
from experiments.runs.config import compose
from pipelines.instantiate import instantiate_component
from tests.support.scripted_chat_generator import ScriptedChatGenerator

RULES = [
    {"route": "no_retrieval", "patterns": {"en": [r"^\W*(hi|hello)\b\W*$"], "zh": [r"^\W*(你好|您好)\W*$"]}},
    {"route": "decompose", "patterns": {"en": [r"\bcompare\b"], "zh": ["比较|区别"]}},
]
# Clear cases in both languages, none of them in data/router/examples.jsonl or the demo golden set.


def round_trip(instance):
    """Through a pipeline's YAML, as a logged pipeline.yaml loads (our modules and the test fakes allowed)."""
    pipeline = Pipeline()
    pipeline.add_component("router", instance)
    return Pipeline.loads(pipeline.dumps(), allowed_modules=["components", "tests"]).get_component("router")


LABELLED = [
    ("Hello!", "no_retrieval"), ("你好！", "no_retrieval"), ("Thanks a lot, bye!", "no_retrieval"),
    ("谢谢，再见！", "no_retrieval"), ("Compare the parking fee in Lyon and in Nantes.", "decompose"),
    ("年假和病假有什么区别？", "decompose"), ("How many vacation days do new hires get?", "single_step"),
    ("报销发票需要在几天内提交？", "single_step"), ("Why was mine rejected?", "clarify"), ("这个能报销吗？", "clarify"),
]


def test_rules_route_the_first_matching_rule_and_are_unsure_otherwise():
    router = RulesRouter(RULES)
    assert router.run(query="比较年假和病假") == {"route": "decompose", "confidence": 1.0, "router": "rules",
                                              "query": "比较年假和病假"}
    assert router.classify("Hello") == RouteDecision("no_retrieval", 1.0, "rules")
    assert router.classify("How many days?") == RouteDecision("single_step", 0.0, "rules")
    assert component_from_dict(RulesRouter, component_to_dict(router, "r"), "r").rules == RULES


@pytest.mark.parametrize(("rules", "message"), [
    ([{"route": "lookup", "patterns": {"en": ["x"]}}], r"rules\[0\].route: unknown route 'lookup'"),
    ([{"route": "clarify", "patterns": {"en": ["("]}}], r"rules\[0\].patterns.en\[0\]: '\(' does not compile"),
    ([{"route": "clarify", "patterns": ["x"]}], r"rules\[0\].patterns: expected \{language"),
])
def test_bad_rules_name_the_rule(rules, message):
    with pytest.raises(ValueError, match=message):
        RulesRouter(rules)


@pytest.fixture(scope="module")
def e5():
    return instantiate_component(compose([]).models.embedder.text, "models.embedder.text", {})


def test_knn_votes_among_the_nearest_examples_with_the_real_embedder(tmp_path, e5):
    examples = tmp_path / "examples.jsonl"
    rows = [("Good morning!", "no_retrieval"), ("Hi there, how are you?", "no_retrieval"), ("早上好！", "no_retrieval"),
            ("What is the refund policy for damaged goods?", "single_step"), ("退货政策是什么？", "single_step"),
            ("How long is the warranty on laptops?", "single_step")]
    examples.write_text("".join(json.dumps({"question": q, "route": r}, ensure_ascii=False) + "\n" for q, r in rows))
    router = KnnRouter(examples=str(examples), embedder=e5, k=3)
    router.warm_up()
    assert router.classify("Hello, good evening!").route == "no_retrieval"
    decision = router.classify("笔记本电脑的保修期多长？")
    assert decision.route == "single_step" and 0.5 < decision.confidence <= 1.0
    restored = round_trip(router)
    assert type(restored.embedder).__name__ == "E5TextEmbedder" and restored.k == 3


def test_knn_examples_name_the_bad_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "Hi", "route": "no_retrieval"}\n{"question": "Hm", "route": "chitchat"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: route: unknown route 'chitchat'"):
        read_examples(bad)
    with pytest.raises(ValueError, match="k must be >= 1"):
        KnnRouter(examples=str(bad), embedder=None, k=0)


def test_the_shipped_examples_are_labelled_in_both_languages_and_share_no_golden_question():
    examples = read_examples(compose([]).router.knn.examples)
    golden = set()
    for name in ("golden.jsonl", "golden_routes.jsonl", "golden_conversations.jsonl"):
        with open(f"data/demo/{name}", encoding="utf-8") as f:
            golden |= {json.loads(line)["question"] for line in f}
    assert not {q for q, _ in examples} & golden
    for route in ROUTES:
        questions = [q for q, r in examples if r == route]
        assert sum(bool(HAN.search(q)) for q in questions) >= 10, route
        assert sum(not HAN.search(q) for q in questions) >= 10, route


def test_llm_router_reads_the_route_and_falls_back_on_an_unusable_reply():
    router = LLMRouter(ScriptedChatGenerator('{"route": "decompose"}'), {"en": "Route: {question}"})
    assert router.run(query="A vs B?") == {"route": "decompose", "confidence": 1.0, "router": "llm", "query": "A vs B?"}
    assert LLMRouter(ScriptedChatGenerator("{oops"), {"en": "{question}"}).classify("x") == RouteDecision(
        "multi_step", 0.0, "llm")
    assert LLMRouter(ScriptedChatGenerator('{"route": "web"}'), {"en": "{question}"}, fallback="single_step").classify(
        "x").route == "single_step"
    restored = round_trip(router)
    assert restored.chat_generator.reply == '{"route": "decompose"}'
    with pytest.raises(ValueError, match="templates need an 'en' prompt"):
        LLMRouter(ScriptedChatGenerator("{}"), {"zh": "{question}"})


def test_the_cascade_stops_at_the_first_sure_router_and_decides_when_none_is():
    generator = ScriptedChatGenerator('{"route": "multi_step"}')
    llm = LLMRouter(generator, {"en": "{question}"})
    cascade = CascadeRouter([RulesRouter(RULES), llm], min_confidence=[1.0, 1.0])
    assert cascade.classify("Hello") == RouteDecision("no_retrieval", 1.0, "rules") and generator.calls == 0
    assert cascade.classify("Who approves it?") == RouteDecision("multi_step", 1.0, "llm") and generator.calls == 1
    unsure = [RulesRouter(RULES), LLMRouter(ScriptedChatGenerator("{oops"), {"en": "{question}"}, fallback="decompose")]
    assert CascadeRouter(unsure, [1.0, 1.0]).classify("x") == RouteDecision("decompose", 0.0, "cascade")
    assert CascadeRouter(unsure, [1.0, 1.0], when_unsure="first").classify("x").route == "single_step"
    restored = round_trip(CascadeRouter(unsure, [1.0, 1.0], when_unsure="first"))
    assert [type(r).__name__ for r in restored.routers] == ["RulesRouter", "LLMRouter"] and restored.when_unsure == "first"
    with pytest.raises(ValueError, match="one min_confidence per router"):
        CascadeRouter([RulesRouter(RULES)], [1.0, 0.5])
    with pytest.raises(ValueError, match="when_unsure must be one of"):
        CascadeRouter([RulesRouter(RULES)], [1.0], when_unsure="coin")
    assert heaviest(["single_step", "no_retrieval", "decompose"]) == "decompose"


def test_a_sure_pick_outside_a_routers_final_routes_only_joins_the_proposals():
    sure_chat = LLMRouter(ScriptedChatGenerator('{"route": "no_retrieval"}'), {"en": "{question}"})
    retrieving = ["single_step", "decompose", "multi_step"]
    cascade = CascadeRouter([RulesRouter(RULES), sure_chat], [1.0, 1.0], final_routes=[None, retrieving])
    assert cascade.classify("Who directed it?") == RouteDecision("single_step", 0.0, "cascade")
    assert cascade.classify("Hello") == RouteDecision("no_retrieval", 1.0, "rules")  # the rules may still skip it
    assert CascadeRouter([RulesRouter(RULES), sure_chat], [1.0, 1.0]).classify("Who?").route == "no_retrieval"
    assert round_trip(cascade).final_routes == [None, retrieving]
    with pytest.raises(ValueError, match="one final_routes entry per router"):
        CascadeRouter([RulesRouter(RULES)], [1.0], final_routes=[None, None])
    with pytest.raises(ValueError, match=r"final_routes\[0\]: unknown route 'web'"):
        CascadeRouter([RulesRouter(RULES)], [1.0], final_routes=[["web"]])


def test_the_shipped_cascade_routes_labelled_questions_in_both_languages():
    cascade = instantiate_component(compose(["router=cascade"]).router.component, "router.component", {})
    cascade.warm_up()
    routed = [(q, cascade.classify(q).route) for q, _ in LABELLED]
    assert routed == LABELLED
    # HaluEval trivia lies far from every handbook example; knn, sure it is chit-chat, may not skip retrieval.
    trivia = "Lou Ferrigno appeared in what 2009 American romantic comedy film that was directed by John Hamburg?"
    assert cascade.routers[1].classify(trivia) == RouteDecision("no_retrieval", 1.0, "knn")
    assert cascade.classify(trivia).route == "single_step"

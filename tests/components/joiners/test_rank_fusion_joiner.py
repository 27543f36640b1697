import pytest
from haystack import Document, Pipeline
from haystack.components.joiners import DocumentJoiner
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.document_stores.in_memory import InMemoryDocumentStore

from components.joiners.rank_fusion_joiner import RankFusionJoiner, path_confidence
from pipelines.haystack_compat import input_sockets


def _docs(*pairs: tuple[str, float]) -> list[Document]:
    return [
        Document(id=doc_id, content=doc_id, score=score, meta={"source": doc_id}) for doc_id, score in pairs
    ]


BM25 = _docs(("a", 9.0), ("b", 7.5), ("c", 5.0), ("d", 2.0), ("e", 0.4))
DENSE = _docs(("c", 0.91), ("f", 0.85), ("a", 0.80), ("g", 0.42), ("b", 0.12))


def _ids(result: dict) -> list[str]:
    return [doc.id for doc in result["documents"]]


class TestRrf:
    def test_equals_document_joiner_rrf(self):
        # DocumentJoiner: k=61 over 0-based ranks == rrf_k=60 over 1-based ranks; scores differ by a constant.
        ours = RankFusionJoiner(paths=["bm25", "dense"], rrf_k=60).run(bm25=BM25, dense=DENSE)["documents"]
        theirs = DocumentJoiner(join_mode="reciprocal_rank_fusion").run(documents=[BM25, DENSE])["documents"]
        assert [doc.id for doc in ours] == [doc.id for doc in theirs]
        factor = theirs[0].score / ours[0].score
        assert [doc.score for doc in theirs] == pytest.approx([doc.score * factor for doc in ours])

    def test_scores_follow_the_formula(self):
        result = RankFusionJoiner(paths=["bm25", "dense"], rrf_k=10, weights={"bm25": 2.0}).run(
            bm25=BM25, dense=DENSE
        )
        scores = {doc.id: doc.score for doc in result["documents"]}
        assert scores["a"] == pytest.approx(2.0 / 11 + 1.0 / 13)
        assert scores["f"] == pytest.approx(1.0 / 12)
        assert scores["e"] == pytest.approx(2.0 / 15)

    def test_weights_shift_the_ranking(self):
        paths = ["bm25", "dense"]
        assert _ids(RankFusionJoiner(paths=paths).run(bm25=BM25, dense=DENSE))[0] == "a"  # a, c tie: id
        heavy_dense = RankFusionJoiner(paths=paths, weights={"dense": 5.0}).run(bm25=BM25, dense=DENSE)
        assert _ids(heavy_dense) == ["c", "a", "b", "f", "g", "d", "e"]
        no_dense = RankFusionJoiner(paths=paths, weights={"dense": 0.0}).run(bm25=BM25, dense=DENSE)
        assert _ids(no_dense) == ["a", "b", "c", "d", "e"]

    def test_fusion_ranks_and_copies(self):
        documents = RankFusionJoiner(paths=["bm25", "dense"]).run(bm25=BM25, dense=DENSE)["documents"]
        by_id = {doc.id: doc for doc in documents}
        assert by_id["a"].meta == {"source": "a", "fusion_ranks": {"bm25": 1, "dense": 3}}
        assert by_id["f"].meta["fusion_ranks"] == {"dense": 2}
        assert "fusion_ranks" not in BM25[0].meta and BM25[0].score == 9.0

    def test_ties_break_by_best_single_rank_then_id(self):
        one = _docs(("x", 1.0), ("y", 0.5))
        other = _docs(("z", 1.0), ("w", 0.5))
        # x and z tie with rank 1 each, y and w with rank 2 each: ids decide.
        assert _ids(RankFusionJoiner(paths=["p", "q"]).run(p=one, q=other)) == ["x", "z", "w", "y"]
        # zz (rank 1 in p: 1/2) and aa (rank 2 in q, weight 1.5: 1.5/3) tie at 0.5: the better rank wins.
        joiner = RankFusionJoiner(paths=["p", "q"], rrf_k=1, weights={"q": 1.5})
        result = joiner.run(p=_docs(("zz", 1.0)), q=_docs(("top", 1.0), ("aa", 0.5)))
        assert [(doc.id, doc.score) for doc in result["documents"]] == [
            ("top", 0.75),
            ("zz", 0.5),
            ("aa", 0.5),
        ]

    def test_repeated_ids_in_one_path_count_once(self):
        result = RankFusionJoiner(paths=["p"], rrf_k=1).run(p=_docs(("a", 2.0), ("a", 1.0), ("b", 0.5)))
        assert [(doc.id, doc.score) for doc in result["documents"]] == [
            ("a", 0.5),
            ("b", pytest.approx(1 / 3)),
        ]

    def test_top_k(self):
        joiner = RankFusionJoiner(paths=["bm25", "dense"], top_k=2)
        assert len(joiner.run(bm25=BM25, dense=DENSE)["documents"]) == 2
        assert len(joiner.run(bm25=BM25, dense=DENSE, top_k=4)["documents"]) == 4
        assert joiner.run(bm25=BM25, dense=DENSE, top_k=0) == {"documents": [], "degraded": []}
        with pytest.raises(ValueError, match="top_k"):
            joiner.run(bm25=BM25, top_k=-1)

    def test_missing_and_empty_paths(self):
        joiner = RankFusionJoiner(paths=["bm25", "dense"])
        assert _ids(joiner.run(bm25=BM25)) == ["a", "b", "c", "d", "e"]
        assert joiner.run() == {"documents": [], "degraded": []}
        assert joiner.run(bm25=[], dense=[]) == {"documents": [], "degraded": []}


class TestMinScores:
    def test_documents_below_the_path_minimum_are_dropped(self):
        joiner = RankFusionJoiner(paths=["bm25", "dense"], min_scores={"bm25": 5.0, "dense": 0.5})
        documents = joiner.run(bm25=BM25, dense=DENSE)["documents"]
        assert {doc.id for doc in documents} == {"a", "b", "c", "f"}
        assert {doc.id: doc.meta["fusion_ranks"] for doc in documents}["b"] == {"bm25": 2}

    def test_path_without_real_matches_adds_nothing(self):
        joiner = RankFusionJoiner(paths=["bm25", "dense"], min_scores={"dense": 0.95})
        assert _ids(joiner.run(bm25=BM25, dense=DENSE)) == ["a", "b", "c", "d", "e"]

    def test_documents_without_score_fail_a_minimum(self):
        unscored = [Document(id="u", content="u")]
        assert RankFusionJoiner(paths=["p"], min_scores={"p": 0.0}).run(p=unscored) == {"documents": [], "degraded": []}
        assert _ids(RankFusionJoiner(paths=["p"]).run(p=unscored)) == ["u"]


class TestLanguageFit:
    def _joiner(self, unfit_weight: float = 0.0) -> RankFusionJoiner:
        return RankFusionJoiner(
            paths=["bm25", "dense"], path_languages={"dense": ["en"]}, unfit_weight=unfit_weight
        )

    def test_english_query_keeps_dense(self):
        documents = self._joiner().run(query="what is hybrid search?", bm25=BM25, dense=DENSE)["documents"]
        assert {"f", "g"} <= {doc.id for doc in documents}

    def test_chinese_query_drops_dense(self):
        documents = self._joiner().run(query="什么是混合检索？", bm25=BM25, dense=DENSE)["documents"]
        assert [doc.id for doc in documents] == ["a", "b", "c", "d", "e"]
        assert all(list(doc.meta["fusion_ranks"]) == ["bm25"] for doc in documents)

    def test_unfit_weight_scales_the_path(self):
        documents = self._joiner(0.5).run(query="混合检索", bm25=BM25, dense=DENSE)["documents"]
        assert {doc.id: doc.score for doc in documents}["f"] == pytest.approx(0.5 / 62)

    def test_without_query_no_path_is_penalised(self):
        assert "f" in _ids(self._joiner().run(bm25=BM25, dense=DENSE))


class TestQueryAdaptiveWeights:
    def test_gap_confidence_is_the_top_gap_over_the_range(self):
        assert path_confidence(BM25, "gap") == pytest.approx((9.0 - 7.5) / (9.0 - 0.4))
        assert path_confidence(_docs(("a", 1.0)), "gap") == 1.0
        assert path_confidence(_docs(("a", 0.5), ("b", 0.5)), "gap") == 0.0

    def test_entropy_confidence_is_higher_for_a_peaked_list(self):
        peaked = _docs(("a", 10.0), ("b", 1.0), ("c", 1.0), ("d", 1.0))
        flat = _docs(("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0))
        assert 0.0 <= path_confidence(flat, "entropy") < path_confidence(peaked, "entropy") <= 1.0

    def test_the_confident_path_wins_where_static_weights_tie(self):
        bm25 = _docs(("a", 10.0), ("b", 1.0), ("c", 0.9))  # one clear hit
        dense = _docs(("c", 0.80), ("b", 0.79), ("d", 0.78), ("a", 0.10))  # no clear favourite
        static = RankFusionJoiner(paths=["bm25", "dense"], mode="rrf")
        adaptive = RankFusionJoiner(paths=["bm25", "dense"], mode="rrf", confidence="gap", confidence_strength=2.0)
        assert _ids(static.run(bm25=bm25, dense=dense))[0] == "c"
        assert _ids(adaptive.run(bm25=bm25, dense=dense))[0] == "a"

    @pytest.mark.parametrize("mode", ["rrf", "dbsf"])
    def test_paths_equally_confident_keep_the_static_order(self, mode):
        bm25 = _docs(("a", 9.0), ("b", 5.0), ("c", 1.0))
        dense = _docs(("c", 0.9), ("d", 0.5), ("a", 0.1))  # the same score shape: the same confidence
        static = RankFusionJoiner(paths=["bm25", "dense"], mode=mode, weights={"bm25": 1.0, "dense": 1.5})
        adaptive = RankFusionJoiner(paths=["bm25", "dense"], mode=mode, weights={"bm25": 1.0, "dense": 1.5},
                                    confidence="gap", confidence_strength=2.0)
        assert _ids(adaptive.run(bm25=bm25, dense=dense)) == _ids(static.run(bm25=bm25, dense=dense))


class TestDelegatedModes:
    @pytest.mark.parametrize(
        ("mode", "join_mode"),
        [("dbsf", "distribution_based_rank_fusion"), ("concatenate", "concatenate"), ("merge", "merge")],
    )
    def test_equals_document_joiner(self, mode, join_mode):
        ours = RankFusionJoiner(paths=["bm25", "dense"], mode=mode).run(bm25=BM25, dense=DENSE)["documents"]
        theirs = DocumentJoiner(join_mode=join_mode).run(documents=[BM25, DENSE])["documents"]
        assert [(doc.id, doc.score) for doc in ours] == [(doc.id, pytest.approx(doc.score)) for doc in theirs]
        assert all("fusion_ranks" in doc.meta for doc in ours)

    def test_dbsf_agreement_bonus_adds_the_other_paths_share(self):
        plain = {d.id: d.score for d in RankFusionJoiner(paths=["bm25", "dense"], mode="dbsf").run(bm25=BM25, dense=DENSE)["documents"]}
        rescaled = [
            {d.id: d.score for d in DocumentJoiner._distribution_based_rank_fusion([docs])} for docs in (BM25, DENSE)
        ]
        bonus = RankFusionJoiner(paths=["bm25", "dense"], mode="dbsf", agreement_bonus=0.2)
        for doc in bonus.run(bm25=BM25, dense=DENSE)["documents"]:
            found = [r[doc.id] for r in rescaled if doc.id in r]
            assert doc.score == pytest.approx(max(found) + 0.2 * (sum(found) - max(found)))
            assert plain[doc.id] == pytest.approx(max(found))

    def test_dbsf_does_not_let_a_lone_raw_score_win(self):
        lone = [Document(id="x", content="x", score=3.1)]
        fused = RankFusionJoiner(paths=["bm25", "dense"], mode="dbsf").run(bm25=lone, dense=DENSE)["documents"]
        assert {d.id: d.score for d in fused}["x"] == pytest.approx(0.5)
        assert fused[0].id != "x"

    def test_merge_uses_weights_in_path_order(self):
        weights = {"dense": 3.0, "bm25": 1.0}
        ours = RankFusionJoiner(paths=["bm25", "dense"], mode="merge", weights=weights).run(
            bm25=BM25, dense=DENSE
        )
        theirs = DocumentJoiner(join_mode="merge", weights=[1.0, 3.0]).run(documents=[BM25, DENSE])
        assert [(d.id, d.score) for d in ours["documents"]] == [
            (d.id, pytest.approx(d.score)) for d in theirs["documents"]
        ]

    def test_zero_weight_drops_the_path_in_every_mode(self):
        joiner = RankFusionJoiner(paths=["bm25", "dense"], mode="dbsf", path_languages={"dense": ["en"]})
        assert _ids(joiner.run(query="向量检索", bm25=BM25, dense=DENSE)) == ["a", "b", "c", "d", "e"]


class TestSocketsAndSerialisation:
    def test_one_optional_socket_per_path(self):
        sockets = input_sockets(RankFusionJoiner(paths=["bm25", "dense"]))
        assert set(sockets) == {"bm25", "dense", "query", "top_k", "degraded"}
        assert sockets["bm25"].type == list[Document] and sockets["bm25"].default_value == []
        assert not any(socket.is_mandatory for socket in sockets.values())

    def test_to_dict_from_dict_round_trip(self):
        joiner = RankFusionJoiner(
            paths=["bm25", "dense"],
            mode="dbsf",
            rrf_k=30,
            weights={"bm25": 1, "dense": 0.5},
            min_scores={"dense": 0.3},
            path_languages={"dense": ["en", "zh"]},
            unfit_weight=0.25,
            agreement_bonus=0.2,
            top_k=7,
            confidence="gap",
            confidence_strength=1.5,
        )
        data = joiner.to_dict()
        assert data == {
            "type": "components.joiners.rank_fusion_joiner.RankFusionJoiner",
            "init_parameters": {
                "paths": ["bm25", "dense"],
                "mode": "dbsf",
                "rrf_k": 30,
                "weights": {"bm25": 1.0, "dense": 0.5},
                "min_scores": {"dense": 0.3},
                "path_languages": {"dense": ["en", "zh"]},
                "unfit_weight": 0.25,
                "agreement_bonus": 0.2,
                "top_k": 7,
                "confidence": "gap",
                "confidence_strength": 1.5,
            },
        }
        clone = RankFusionJoiner.from_dict(data)
        assert clone.to_dict() == data
        assert set(input_sockets(clone)) == {"bm25", "dense", "query", "top_k", "degraded"}
        assert _ids(clone.run(bm25=BM25, dense=DENSE)) == _ids(joiner.run(bm25=BM25, dense=DENSE))

    def test_to_dict_with_defaults(self):
        assert RankFusionJoiner(paths=["bm25"]).to_dict() == {
            "type": "components.joiners.rank_fusion_joiner.RankFusionJoiner",
            "init_parameters": {
                "paths": ["bm25"],
                "mode": "rrf",
                "rrf_k": 60,
                "weights": None,
                "min_scores": None,
                "path_languages": None,
                "unfit_weight": 0.0,
                "agreement_bonus": 0.0,
                "top_k": None,
                "confidence": None,
                "confidence_strength": 0.0,
            },
        }

    def test_in_a_pipeline_with_named_sockets(self):
        store = InMemoryDocumentStore()
        store.write_documents(
            [
                Document(id="1", content="apple pie recipe"),
                Document(id="2", content="apple tart"),
                Document(id="3", content="cherry pie"),
                Document(id="4", content="banana bread"),
            ]
        )
        pipe = Pipeline()
        pipe.add_component("a", InMemoryBM25Retriever(store))
        pipe.add_component("b", InMemoryBM25Retriever(store))
        pipe.add_component(
            "joiner", RankFusionJoiner(paths=["bm25", "dense"], path_languages={"dense": ["en"]})
        )
        pipe.connect("a.documents", "joiner.bm25")
        pipe.connect("b.documents", "joiner.dense")
        inputs = {"a": {"query": "apple"}, "b": {"query": "pie"}, "joiner": {"query": "apple pie"}}
        result = pipe.run(inputs, include_outputs_from={"a", "b"})
        expected = RankFusionJoiner(paths=["bm25", "dense"]).run(
            bm25=result["a"]["documents"], dense=result["b"]["documents"]
        )
        assert result["joiner"] == expected
        assert {doc.id: set(doc.meta["fusion_ranks"]) for doc in expected["documents"]} == {
            "1": {"bm25", "dense"},
            "2": {"bm25"},
            "3": {"dense"},
        }


class TestValidation:
    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"paths": []}, "paths"),
            ({"paths": "bm25"}, "paths"),
            ({"paths": ["a", "a"]}, "unique"),
            ({"paths": ["query"]}, "reserved"),
            ({"paths": ["a.b"]}, "socket name"),
            ({"mode": "borda"}, "mode"),
            ({"rrf_k": 0}, "rrf_k"),
            ({"unfit_weight": -1}, "unfit_weight"),
            ({"top_k": 0}, "top_k"),
            ({"weights": {"bm25": -1.0}}, "weights"),
            (
                {"weights": {"sparse": 1.0}},
                r"weights names unknown path 'sparse'; valid paths: \['bm25', 'dense'\]",
            ),
            ({"min_scores": {"sparse": 1.0}}, "min_scores names unknown path 'sparse'"),
            ({"path_languages": {"sparse": ["en"]}}, "path_languages names unknown path 'sparse'"),
            ({"path_languages": {"dense": ["fr"]}}, r"path_languages\['dense'\]"),
            ({"confidence": "margin"}, "confidence must be None or one of"),
            ({"confidence_strength": -1.0}, "confidence_strength must be >= 0"),
        ],
    )
    def test_invalid_parameters_are_named(self, kwargs, message):
        with pytest.raises(ValueError, match=message):
            RankFusionJoiner(**{"paths": ["bm25", "dense"], **kwargs})

    def test_unknown_path_at_run_time(self):
        with pytest.raises(ValueError, match="sparse"):
            RankFusionJoiner(paths=["bm25"]).run(sparse=BM25)


class TestDegradedPaths:
    def test_fusion_ranks_the_paths_that_answered_and_names_those_that_failed(self):
        joiner = RankFusionJoiner(paths=["bm25", "dense"])
        bm25 = _docs(("a", 3.0), ("b", 1.0))
        result = joiner.run(bm25=bm25, degraded=[[], ["dense"]])
        assert _ids(result) == _ids(joiner.run(bm25=bm25)) == ["a", "b"]
        assert result["degraded"] == ["dense"]
        assert joiner.run(bm25=bm25)["degraded"] == []

    def test_when_every_path_failed_the_request_fails(self):
        with pytest.raises(RuntimeError, match="every retrieval path failed for this request: bm25, dense"):
            RankFusionJoiner(paths=["bm25", "dense"]).run(degraded=[["bm25"], ["dense"]])

    def test_an_unknown_failed_path_is_refused(self):
        with pytest.raises(ValueError, match=r"unknown paths \['web'\]"):
            RankFusionJoiner(paths=["bm25", "dense"]).run(degraded=[["web"]])

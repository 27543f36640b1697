"""Fusion of the retrieval paths (RankFusionJoiner)."""

"""serve.py's HTTP API: the app (app.py), its routes (routes.py) and how they answer (answering.py), refusals
(refusals.py), credentials (auth.py) and server-sent events (streaming.py)."""

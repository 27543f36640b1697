import os

# Tests run offline and must not phone home.
for key, value in {
    "HAYSTACK_TELEMETRY_ENABLED": "False",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}.items():
    os.environ.setdefault(key, value)

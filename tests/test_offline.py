"""The whole suite runs with the model hubs unreachable: HF libraries are offline in every test process."""

import os


def test_hf_libraries_are_offline_in_the_test_processes():
    import huggingface_hub.constants

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert huggingface_hub.constants.HF_HUB_OFFLINE is True

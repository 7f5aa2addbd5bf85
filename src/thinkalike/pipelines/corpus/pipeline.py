"""``corpus``: the offline language, its tokenizer and packed token sequences."""

from kedro.pipeline import Node, Pipeline

from thinkalike.pipelines.corpus import nodes


def create_pipeline(**kwargs) -> Pipeline:
    return Pipeline([
        Node(nodes.generate_corpus, "params:corpus", "sentences", name="generate_corpus"),
        Node(nodes.split_corpus, ["sentences", "params:corpus"], ["train_sentences", "heldout_sentences"],
             name="split_corpus"),
        Node(nodes.build_evaluation_texts, ["heldout_sentences", "params:corpus"], "evaluation_texts",
             name="build_evaluation_texts"),
        Node(nodes.fit_tokenizer, ["train_sentences", "params:corpus"], "tokenizer", name="fit_tokenizer"),
        Node(nodes.pack_language_model_data, ["train_sentences", "heldout_sentences", "tokenizer", "params:corpus"],
             ["train_sequences", "heldout_sequences"], name="pack_language_model_data"),
        Node(nodes.pack_evaluation_data, ["evaluation_texts", "tokenizer", "params:corpus"],
             ["evaluation_sequences", "evaluation_index"], name="pack_evaluation_data"),
        Node(nodes.describe_corpus, ["sentences", "train_sequences", "heldout_sequences", "evaluation_index",
                                     "tokenizer"], ["corpus_statistics", "corpus_metrics"], name="describe_corpus"),
    ])

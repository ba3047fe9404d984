"""Text in, text out: `generate()` on the zoo's causal LMs and BitDelta fine-tunes, in the base's own vocabulary, and
`zoo bitdelta demo`, which never feeds raw bytes to a model whose vocabulary is not bytes (issue 28)."""

import copy

import pytest
import torch

import zoo
from zoo.bitdelta.data import ByteTokenizer
from zoo.bitdelta.delta import compress
from zoo.bitdelta.module import causal_lm
from zoo.cli import main

VOCAB = ["<unk>", "<eos>"] + [f"w{i}" for i in range(298)]  # a 300-word vocabulary: not bytes


def _greedy(lm, ids: list[int], n: int) -> list[int]:
    out = lm.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, pad_token_id=0)[0]
    return out[len(ids):].tolist()


def test_byte_level_models_generate_text():
    base = zoo.load("llama-bytes-3m")
    prompt = "It was a "
    text = base.generate(prompt, max_new_tokens=12)
    assert text == ByteTokenizer().decode(_greedy(causal_lm(base), list(prompt.encode()), 12))
    delta = zoo.load("llama-bytes-3m-austen-bitdelta")
    assert delta.generate(prompt, max_new_tokens=12) == ByteTokenizer().decode(
        _greedy(causal_lm(delta), list(prompt.encode()), 12))
    sampled = [delta.generate(prompt, 12, temperature=0.8, seed=5) for _ in range(2)]
    assert sampled[0] == sampled[1]
    with pytest.raises(ValueError, match="max_new_tokens"):
        delta.generate(prompt, 0)


@pytest.fixture(scope="module")
def word_lm(tmp_path_factory):
    """A tiny Llama with a 300-word vocabulary: a base folder with its tokenizer, one without, and a delta of each."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("word_lm")
    torch.manual_seed(0)
    base = LlamaForCausalLM(LlamaConfig(vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                        eos_token_id=1, bos_token_id=None, pad_token_id=None)).eval()
    words = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>", eos_token="<eos>")
    finetune = copy.deepcopy(base)
    with torch.no_grad():
        for p in finetune.parameters():
            p.add_(0.02 * torch.randn_like(p))
    out = {}
    for name, with_tokenizer in (("with_tokenizer", True), ("bare", False)):
        folder = root / name
        base.save_pretrained(folder)
        if with_tokenizer:
            tokenizer.save_pretrained(folder)
        compress(base, finetune, base_name=str(folder), progress=False).save(root / f"delta_{name}")
        out[name] = folder
    out["root"] = root
    return out


def test_a_delta_generates_with_its_bases_tokenizer(word_lm):
    root = word_lm["root"]
    model = zoo.load(root / "delta_with_tokenizer")
    text = model.generate("w5 w7 w9", max_new_tokens=4)
    ids = [VOCAB.index(w) for w in ("w5", "w7", "w9")]
    assert text == "".join(f" {VOCAB[i]}" for i in _greedy(causal_lm(model), ids, 4) if i != 1)
    with pytest.raises(ValueError, match="raw bytes"):
        model.generate("w5", tokenizer="bytes")


def test_a_base_without_a_reachable_tokenizer_is_named(word_lm, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root = word_lm["root"]
    model = zoo.load(root / "delta_bare")
    with pytest.raises(ValueError, match="not available here") as err:
        model.generate("w5 w7")
    assert "--tokenizer" in str(err.value) and str(word_lm["bare"]) in str(err.value)
    # given explicitly (here: the other folder's copy of the same tokenizer) it works
    assert model.generate("w5 w7", 3, tokenizer=str(word_lm["with_tokenizer"])).startswith(" w")


def test_demo_refuses_raw_bytes_for_a_word_vocabulary(word_lm, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root = word_lm["root"]
    assert main(["bitdelta", "demo", str(root / "delta_bare"), "--prompt", "w5 w7", "--max-new-tokens", "3"]) != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("zoo: error:") and "tokenizer" in errors[0]
    assert main(["bitdelta", "demo", str(root / "delta_bare"), "--prompt", "w5 w7", "--tokenizer", "bytes"]) != 0
    assert "raw bytes" in capsys.readouterr().err
    assert main(["bitdelta", "demo", str(root / "delta_with_tokenizer"), "--with-base", "--prompt", "w5 w7",
                 "--max-new-tokens", "3"]) == 0
    out = capsys.readouterr().out
    assert "2 tenants in one batch" in out and out.count("\nw5 w7 w") == 2

"""BERT-base as a Hugging Face ``transformers`` user writes it (Devlin et al.
2019): ``BertModel`` built from a ``BertConfig`` with random weights (12
layers, 768 wide, 12 heads, intermediate 3072), SDPA attention (the
library's default); forward takes what a tokenizer returns for a padded
batch, integer ``input_ids`` and an ``attention_mask`` (1 for tokens, 0 for
padding; every sequence here is padded to ``seq_len`` from a random length
of at least half of it) and returns the last hidden state."""
import torch
import torch.nn as nn
from transformers import BertConfig, BertModel

batch_size = 8
seq_len = 128
vocab_size = 30522
hidden_size = 768
n_layers = 12
n_heads = 12
intermediate_size = 3072


class Model(nn.Module):
    def __init__(self, vocab_size: int, hidden_size: int, n_layers: int, n_heads: int, intermediate_size: int):
        super().__init__()
        config = BertConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=n_layers,
                            num_attention_heads=n_heads, intermediate_size=intermediate_size, attn_implementation="sdpa")
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def get_inputs():
    input_ids = torch.randint(0, vocab_size, (batch_size, seq_len))
    lengths = torch.randint(seq_len // 2, seq_len + 1, (batch_size, 1))
    attention_mask = (torch.arange(seq_len).unsqueeze(0) < lengths).long()
    return [input_ids, attention_mask]


def get_init_inputs():
    return [vocab_size, hidden_size, n_layers, n_heads, intermediate_size]

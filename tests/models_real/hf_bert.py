"""Hugging Face BERT (transformers' BertModel): integer token ids and a 0/1 attention mask in, hidden states out.

Built from a BertConfig with random weights (no download).  ``get_inputs()``
gives ``input_ids`` (int64) and an ``attention_mask`` (int64, 1 = a real
token, 0 = padding) whose rows end in ``padding`` padded positions from the
second row on, as a batch of sentences of different lengths comes.  Tiny here
for the CPU tests; ``--set n_layer=12 --set hidden=768 --set n_head=12 --set
intermediate=3072 --set vocab_size=30522 --set seq_len=512`` is BERT-base.
"""
import torch
from torch import nn
from transformers import BertConfig, BertModel

batch_size = 2
seq_len = 16
n_layer = 2
hidden = 64
n_head = 4
intermediate = 128
vocab_size = 128
padding = 4
sdpa = True


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        config = BertConfig(num_hidden_layers=n_layer, hidden_size=hidden, num_attention_heads=n_head,
                            intermediate_size=intermediate, vocab_size=vocab_size, max_position_embeddings=max(seq_len, 64),
                            pad_token_id=0, attn_implementation="sdpa" if sdpa else "eager")
        self.bert = BertModel(config, add_pooling_layer=False)

    def forward(self, input_ids, attention_mask):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def get_inputs():
    input_ids = torch.randint(1, vocab_size, (batch_size, seq_len))
    attention_mask = torch.ones(batch_size, seq_len, dtype=torch.int64)
    attention_mask[1:, seq_len - min(padding, seq_len - 1):] = 0  # later sentences are shorter: padded at the end
    return [input_ids, attention_mask]


def get_init_inputs():
    return []

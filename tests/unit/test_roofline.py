"""lego_core.cost.roofline: FLOPs and minimal bytes counted from a captured graph, checked against hand counts."""
import textwrap

import pytest
import torch
import torch.fx as fx

from lego_core.cost import roofline
from lego_core.load.capture import capture_graph
from lego_core.load.problem import ProblemSpec, load_problem

MODEL = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3, padding=1, bias=False)   # weight 6*3*3*3 = 162
            self.fc = nn.Linear(8, 16)                               # weight 128 + bias 16
            self.register_buffer("scale", torch.ones(16))           # 16

        def forward(self, img, x, y):
            c = self.conv(img)                                       # (2, 6, 5, 5)
            h = self.fc(x) * self.scale                              # addmm (4x8)@(8x16)
            z = torch.bmm(y, y.transpose(1, 2))                      # (2,4,8)@(2,8,4)
            return c.sum() + h.sum() + z.sum()

    def get_inputs():
        return [torch.randn(2, 3, 5, 5), torch.randn(4, 8), torch.randn(2, 4, 8)]

    def get_init_inputs():
        return []
    """
)


def test_counts_match_hand_counts(tmp_path):
    path = tmp_path / "counted.py"
    path.write_text(MODEL)
    work = roofline.count_work(capture_graph(load_problem(ProblemSpec(str(path)))))
    conv = 2 * (6 * 3 * 3 * 3) * 2 * (5 * 5)  # 2 * weight.numel * N * out pixels = 16200
    addmm = 2 * 4 * 16 * 8  # 1024
    bmm = 2 * 2 * 4 * 4 * 8  # 1024
    assert work.by_op == {"aten.convolution.default": conv, "aten.addmm.default": addmm, "aten.bmm.default": bmm}
    assert work.cudnn_flops == conv and work.matmul_flops == addmm + bmm and work.flops == conv + addmm + bmm
    # inputs 150 + 32 + 64 floats, parameters 162 + 128 + 16, buffer 16, output 1 scalar; 4 bytes each
    assert work.bytes == 4 * (150 + 32 + 64 + 162 + 128 + 16 + 16 + 1)


def test_lstm_counts_every_weight_matrix_once_per_token(tmp_path):
    path = tmp_path / "rnn.py"
    path.write_text(textwrap.dedent(
        """
        import torch
        import torch.nn as nn

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(5, 7, num_layers=2, batch_first=True)

            def forward(self, x):
                return self.lstm(x)[0]

        def get_inputs():
            return [torch.randn(3, 4, 5)]

        def get_init_inputs():
            return []
        """
    ))
    work = roofline.count_work(capture_graph(load_problem(ProblemSpec(str(path)))))
    tokens = 3 * 4
    weights = 28 * 5 + 28 * 7 + 28 * 7 + 28 * 7  # w_ih0, w_hh0, w_ih1, w_hh1 (4 gates * 7 rows)
    assert work.by_op == {"aten.lstm.input": 2 * tokens * weights}
    assert work.cudnn_flops == 2 * tokens * weights


def _attention_node(is_causal: bool) -> fx.Node:
    graph = fx.Graph()
    args = []
    for name, shape in (("q", (2, 4, 16, 8)), ("k", (2, 4, 32, 8)), ("v", (2, 4, 32, 6))):
        node = graph.placeholder(name)
        node.meta["val"] = torch.empty(shape, device="meta")
        args.append(node)
    return graph.call_function(torch.ops.aten.scaled_dot_product_attention.default, tuple(args), {"is_causal": is_causal})


def test_attention_flops_and_causal_half():
    full = 2 * (2 * 4 * 16) * 32 * (8 + 6)  # QK^T and PV: 2*B*H*L*S*(E+Ev)
    assert roofline.attention_flops(_attention_node(False)) == full
    assert roofline.attention_flops(_attention_node(True)) == full // 2
    assert roofline.node_flops(_attention_node(False)) == ("matmul", full)


def test_floor_is_the_larger_side():
    ceilings = roofline.Ceilings("cpu", "float32", bytes_per_s=1e9, matmul_flops_per_s=1e12, cudnn_flops_per_s=2e12, method="given")
    memory_bound = roofline.floor(roofline.WorkCount(matmul_flops=10**9, cudnn_flops=0, bytes=10**8, by_op={}), ceilings)
    assert memory_bound.bound == "memory" and memory_bound.floor_ms == pytest.approx(100.0) and memory_bound.compute_ms == pytest.approx(1.0)
    compute_bound = roofline.floor(roofline.WorkCount(matmul_flops=10**12, cudnn_flops=2 * 10**12, bytes=10**6, by_op={}), ceilings)
    assert compute_bound.bound == "compute" and compute_bound.floor_ms == pytest.approx(2000.0)


def test_cpu_ceilings_are_measured_once():
    first = roofline.measure_ceilings("cpu", "fp32")
    assert first.bytes_per_s > 0 and first.matmul_flops_per_s > 0 and first.cudnn_flops_per_s == first.matmul_flops_per_s
    assert roofline.measure_ceilings("cpu", torch.float32) is first

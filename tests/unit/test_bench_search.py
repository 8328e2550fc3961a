"""bench/search_models.py: variants, table cells, markdown/rich tables and the summary, from fake reports."""
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import search_models as sm  # noqa: E402
from search_models import RunResult  # noqa: E402


def fake_report(calls, cost_ms, first=0.5, final=2.25, reused=3, tried=4, accepted=1, search_s=3.0, kind="estimated"):
    return {
        "metrics": {
            "agent_calls": calls,
            "tokens": 0,
            "time_to_first_plan_s": first,
            "time_to_final_plan_s": final,
            "reused_nodes": reused,
            "mutations_tried": tried,
            "mutations_accepted": accepted,
            "best_cost_over_time": [[first, cost_ms * 1.5], [final, cost_ms]],
            "search_time_s": search_s,
        },
        "plan": {"cost_ms": cost_ms, "cost_kind": kind, "baseline_ms": 0.2, "speedup": 0.2 / cost_ms},
    }


def results():
    return [
        RunResult("mlp_residual", "default", fake_report(6, 0.0800), wall_s=7.25),
        RunResult("mlp_residual", "monolithic", fake_report(1, 0.1200, reused=0, tried=0, accepted=0), wall_s=4.0),
        RunResult("mlp_residual", "no-dedupe", fake_report(12, 0.0800, reused=0), wall_s=9.0),
        RunResult("mlp_residual", "no-mutation", fake_report(5, 0.1000, tried=0, accepted=0), wall_s=6.0),
        RunResult("mlp_residual", "agents 1", fake_report(6, 0.0800, search_s=4.0), wall_s=8.0),
        RunResult("mlp_residual", "agents 4", fake_report(6, 0.0800, search_s=1.0), wall_s=5.0),
        RunResult("scores_chain", "default", fake_report(2, 0.0031, kind="measured"), wall_s=3.0),
        RunResult("scores_chain", "no-dedupe", error="OptimizeError: the composed model does not match | eager", wall_s=1.5),
    ]


def test_variant_names():
    assert sm.variant_name("agents-4") == "agents 4"
    assert sm.variant_name("Agents4") == "agents 4"
    assert sm.variant_name("agents=2") == "agents 2"
    assert sm.variant_name("no-dedupe") == "no-dedupe"
    assert sm.variant_settings("agents 2") == {"agents": 2}
    assert sm.variant_settings("monolithic") == {"strategy": "monolithic"}
    with pytest.raises(ValueError, match="unknown variant"):
        sm.variant_name("greedy")


def test_every_variant_makes_a_fresh_config():
    for name in list(sm.VARIANTS) + ["agents 3"]:
        config = sm.make_config(name, 60.0)
        assert config.cache is False and config.timeout_s == 60.0
    assert sm.make_config("no-mutation", None).mutation is False
    assert sm.make_config("agents 4", None).agents == 4


def test_row_cells():
    ok, failed = results()[0], results()[-1]
    assert sm.row_cells(ok) == ["mlp_residual", "default", "6", "0.50", "2.25", "0.0800 est", "3", "1/4", "7.2"]
    assert sm.row_cells(results()[6])[5] == "0.0031 meas"
    assert sm.row_cells(failed) == ["scores_chain", "no-dedupe", "FAILED", "", "", "", "", "", "1.5"]
    columns, rows = sm.table(results())
    assert columns == list(sm.COLUMNS) + ["error"]  # only when a run failed
    assert rows[-1][-1] == "OptimizeError: the composed model does not match | eager"
    assert rows[0][-1] == ""
    assert sm.table(results()[:2])[0] == list(sm.COLUMNS)


def test_row_cells_before_the_metrics_exist():
    """A report from a search that does not yet count mutations or plan times."""
    old = RunResult("m", "default", {"metrics": {"agent_calls": 3, "reused_nodes": 1}, "plan": {"cost_ms": 0.5, "cost_kind": "estimated"}}, wall_s=2.0)
    assert sm.row_cells(old) == ["m", "default", "3", "-", "-", "0.5000 est", "1", "-", "2.0"]


def test_markdown_table():
    text = sm.render_markdown(results())
    lines = text.splitlines()
    assert lines[0] == "| " + " | ".join(sm.COLUMNS) + " | error |"
    assert len(lines) == 2 + len(results())
    assert "| mlp_residual | agents 4 | 6 | 0.50 | 2.25 | 0.0800 est | 3 | 1/4 | 5.0 |  |" in lines
    assert "does not match \\| eager" in text  # a pipe in an error does not break the table


def test_rich_table():
    text = sm.render_rich(results(), width=220)
    assert "\x1b[" not in text
    for expected in ("mlp_residual", "no-mutation", "0.1000 est", "12", "FAILED", "OptimizeError: the composed", "0.0031 meas"):
        assert expected in text


def test_summary_numbers():
    lines = sm.summary_lines(results())
    mlp, scores = lines
    assert mlp.startswith("mlp_residual: ")
    assert "dedupe calls 0.50 (6 vs 12)" in mlp
    assert "mutation cost 0.800 (0.0800 vs 0.1000 ms)" in mlp
    assert "monolithic cost 1.50x default (0.1200 vs 0.0800 ms)" in mlp
    assert "agents 4 vs 1 wall 0.25 (1.0 vs 4.0 s)" in mlp  # the search's own wall time
    assert scores == "scores_chain: no comparison (runs missing or failed)"


def test_summary_falls_back_to_run_wall_time():
    a1 = RunResult("m", "agents 1", {"metrics": {}, "plan": {}}, wall_s=10.0)
    a4 = RunResult("m", "agents 4", {"metrics": {}, "plan": {}}, wall_s=5.0)
    assert sm.summary_lines([a1, a4]) == ["m: agents 4 vs 1 wall 0.50 (5.0 vs 10.0 s)"]


def test_report_text_says_cache_off_and_names_the_machine():
    text = sm.report_text(results(), markdown=True)
    assert "cache=False" in text and "measured fresh" in text
    assert "- mlp_residual: dedupe calls 0.50" in text
    assert "CPUs" in text and "torch " in text and "triton " in text


def test_dry_run_prints_every_planned_run(capsys, shared_models):
    assert sm.main(["--dry-run", "--models", "scores_chain.py", "mlp_residual", "--variants", "default", "agents-4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 runs planned")
    assert "scores_chain       agents 4     agents=4" in out
    assert "batch_size=8 d_model=48 d_hidden=96" in out


def test_token_table_of_llm_scripted_runs():
    def llm(model, variant, calls, prompt, completion):
        report = fake_report(calls, 0.1)
        report["metrics"].update(prompt_tokens=prompt, completion_tokens=completion)
        return RunResult(model, variant, report, llm_requests=calls)

    runs = [llm("m", "default", 4, 2000, 80), llm("m", "monolithic", 1, 1500, 20),
            RunResult("n", "default", error="boom", llm_requests=0)]
    assert sm.token_rows(runs) == [["m", "default", "4", "2000", "80", "500"], ["m", "monolithic", "1", "1500", "20", "1500"],
                                   ["n", "default", "0", "-", "-", "-"]]
    text = sm.render_tokens(runs, markdown=True)
    assert "| all models | default | 4 | 2000 | 80 | 500 |" in text and "real prompts, scripted replies" in text
    assert sm.make_config("monolithic", None, "llm").agent == "llm"

"""bench/results.py: a bench's new results go on top and every earlier one, notes included, stays."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from results import HISTORY, copies_for, record, rotated  # noqa: E402


def test_rotated_goes_round_the_calls_and_holds_each_result_until_its_turn():
    made = []

    def make(i):
        def call():
            made.append(i)
            return [i, len(made)]  # a new object each call

        return call

    run = rotated([make(i) for i in range(3)])
    first = [run() for _ in range(3)]
    assert made == [0, 1, 2] and first == [[0, 1], [1, 2], [2, 3]]
    again = run()
    assert made == [0, 1, 2, 0] and again == [0, 4]
    # what calls 1 and 2 returned is still held (a CUDA graph's pool would hand its memory to the
    # next call's result otherwise); call 0's first result was let go for its second
    assert run.held == [[0, 4], [1, 2], [2, 3]]


def test_copies_for_fills_twice_the_l2_cache():
    assert copies_for(8 << 20, 50 << 20) == 13  # ceil(100 / 8)
    assert copies_for(200 << 20, 50 << 20) == 1  # one set is larger than the cache already
    assert copies_for(1, 50 << 20) == 64  # capped


def test_new_results_go_on_top_and_the_earlier_ones_stay(tmp_path, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    path = tmp_path / "RESULTS-x.md"
    record(path, "# x benchmark\n\nfirst table\n", "# x benchmark")
    assert path.read_text() == "# x benchmark\n\nfirst table\n"
    path.write_text(path.read_text() + "\nReading: notes on the first table.\n")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("OUT", str(out))
    text = record(path, "# x benchmark\n\nsecond table\n", "# x benchmark")
    new, _, earlier = text.partition(HISTORY)
    assert "second table" in new and "first table" not in new
    assert "first table" in earlier and "notes on the first table" in earlier
    assert text.count("# x benchmark") == 1
    assert (out / "RESULTS-x.md").read_text() == text == path.read_text()
    third = record(path, "# x benchmark\n\nthird table\n", "# x benchmark")
    earlier = third.partition(HISTORY)[2]
    assert earlier.index("second table") < earlier.index("first table")


def test_the_suite_bench_renders_gpu_time_tables_only_where_measured():
    import bench_suite

    results = {
        "softmax": {
            1024: {
                "fwd": {"generated": 0.01, "torch.compile": 0.02},
                "fwd graphs": {"generated": 0.004, "torch.compile": 0.005},
            },
            65536: {"fwd": {"generated": 0.02, "torch.compile": 0.01}},
        },
        "int_only": {1024: {"fwd": {"generated": 0.01}}, 65536: {}},
    }
    text = bench_suite.render(results, [1024, 65536], "# suite")
    assert "Forward + backward" not in text  # nothing measured for it
    graphs = text.partition("GPU time alone")[2]
    assert "| softmax | 0.0040 | 0.0050 | 1.25x | - | - | - |" in graphs
    assert "| softmax | 0.0100 | 0.0200 | 2.00x | 0.0200 | 0.0100 | 0.50x |" in text
    assert "| int_only | - | - | - | - | - | - |" in text  # no peer to compare with


def test_the_suite_bench_gives_inference_builds_tables_of_their_own():
    import bench_suite

    results = {
        "rms_norm_residual": {
            1024: {
                "fwd": {"generated": 0.02, "torch.compile": 0.01, "inference": 0.005},
                "fwd graphs": {"generated": 0.004, "torch.compile": 0.003},
            }
        }
    }
    text = bench_suite.render(results, [1024], "# suite")
    plain, _, served = text.partition("Forward of the inference builds")
    assert "| rms_norm_residual | 0.0200 | 0.0100 | 0.50x |" in plain
    assert "| rms_norm_residual | 0.0050 | 0.0100 | 2.00x |" in served.split("Forward,")[0]
    assert text.count("inference builds") == 1  # no inference time in the GPU-time rows

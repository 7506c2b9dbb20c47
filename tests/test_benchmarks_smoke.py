"""The attention benchmark runs end to end at tiny sizes and prints its table."""


def test_bench_attention_quick_prints_a_table(run_benchmark):
    out = run_benchmark("bench_attention.py", "--quick")
    lines = out.splitlines()
    assert "| attention | compile | layer | ms (median) |" in out
    rows = [line for line in lines if line.startswith(("| self |", "| cross |"))]
    # 2 attention kinds × 2 compile modes × (ours, keras, floor).
    assert len(rows) == 12, out
    assert "GFLOP/s" in out and "Ceiling" in out
    # Forward FLOPs from the --quick sizes (B 2, d 32, 4 heads of 8, n 16, m 16 or 12):
    # the Q, K, V and output projections, QKᵀ and AV, 2 per multiply-add.
    flops = {}
    for attention, n, m in (("self", 16, 16), ("cross", 16, 12)):
        projections = 2 * 2 * (2 * n + 2 * m) * 32 * 32
        flops[attention] = projections + 2 * (2 * 2 * 4 * n * m * 8)
    assert f"Forward FLOPs: self {flops['self'] / 1e9:.4g} G, cross {flops['cross'] / 1e9:.4g} G" \
        in out
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        milliseconds, achieved = float(cells[3]), float(cells[5])  # rounded to 0.01, 0.1
        # GFLOP/s is forward + backward (3 × the forward FLOPs) over the median time.
        low, high = (3 * flops[cells[0]] / max(milliseconds + d, 1e-6) / 1e6
                     for d in (0.005, -0.005))
        assert low - 0.05 <= achieved <= high + 0.05, row
        if cells[2] in ("ours", "floor"):
            ratio, spread = cells[7].split(" ", 1)  # keras/ours, (min–max) over rounds
            smallest, largest = (float(x) for x in spread.strip("()").split("–"))
            assert smallest <= float(ratio) <= largest, row

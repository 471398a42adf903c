"""calibrate fit and collectives --compare on what a user's trial gave them: sendrecv_perf's redop
column, a capture faster than the cluster file's in-node link, a sweep of latency rows only, and a
profile of another GPU."""
from test_calibrate import PUBLIC, cli

SENDRECV = PUBLIC / "liplus_a100_8gpu_sendrecv.txt"


def test_sendrecv_perf_s_redop_sum_is_read_as_send_recv(tmp_path):
    """sendrecv_perf prints the -o op it was handed (sum) though it reduces nothing: the shipped
    capture fits and compares."""
    assert "float     sum" in SENDRECV.read_text()
    out = tmp_path / "p.yaml"
    args = ("--cluster", "dgx-a100", "--nodes", "1", "--gpus-per-node", "8")
    rc, so, se = cli("calibrate", "fit", str(SENDRECV), *args, "-o", str(out))
    assert rc == 0 and out.exists() and "comm.intra_node.send_recv" in so, se
    rc, so, se = cli("collectives", *args, "--profile", str(out), "--compare", str(SENDRECV))
    assert rc == 0 and "send_recv" in so and "time error, all sizes" in so, se

#!/usr/bin/env bash
# caliper calc batching-gain explains which factor carries the gain: idle
# bandwidth fed, bytes saved per token, or (bandwidth factor below 1) a batch
# that waits on compute.
. "$(dirname "$0")/lib.sh"
out=$("$CALIPER" calc batching-gain --bw-single 20GB/s --bw-batch 12GB/s \
      --bytes-single 400MB --bytes-batch 52MB)
check "the gain is 0.6 x 7.692" grep -q '0.6000 × 7.692 = 4.615' <<<"$out"
check "bandwidth factor below 1 reads as compute-bound" grep -q 'waits on compute' <<<"$out"
out=$("$CALIPER" calc batching-gain --bw-single 180GB/s --bw-batch 360GB/s \
      --bytes-single 4GB --bytes-batch 3.6GB)
check "idle bandwidth fed dominates" grep -q 'feeding bandwidth that sat idle' <<<"$out"
check "and is not called compute-bound" bash -c '! grep -q "waits on compute" <<<"$1"' _ "$out"
finish

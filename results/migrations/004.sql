-- Version 3 -> 4: the GPU a run's kernels ran on.

-- For a target nvidia run, the CUDA device that ran its kernels as the
-- device describes itself ("NVIDIA H200, sm_90, 139.8 GiB"); NULL for a run
-- on the CPU.
ALTER TABLE runs ADD COLUMN gpu TEXT;

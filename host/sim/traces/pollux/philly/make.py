"""Philly's jobs as the artifact samples its workloads from them
(`simulator/workload.py`: run at least 60 s, under 1000 GPU-hours), one
row per job in submission order: seconds since the first one, run time in
seconds, GPUs. Run in the artifact's `simulator/`:

    python3 make.py > philly.csv
"""
import pandas

trace = pandas.read_csv("traces/philly.csv", parse_dates=["timestamp"])
trace = trace[trace.duration >= 60]
trace = trace[trace.gpu_time < 1000 * 3600]
trace = trace.sort_values("timestamp", kind="stable")
start = trace.timestamp.min()
print("time,duration,num_gpus")
for row in trace.itertuples():
    since = int((row.timestamp - start).total_seconds())
    print(f"{since},{int(row.duration)},{int(row.num_gpus)}")

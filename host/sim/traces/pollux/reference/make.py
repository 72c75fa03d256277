# Reference values computed by the Pollux artifact's own simulator code
# (petuum/adaptdl, branch osdi21-artifact, simulator/), for the tests of
# host/sim/src/measured.rs. Run from that directory:
#   python3 make.py   (numpy 1.23, pandas 1.5, scipy 1.11, pymoo 0.4.2.2)
# It writes throughput.csv and alone.csv to the current directory.
import sys, csv
import pandas
from applications import APPLICATIONS
from simulator import Job

def packed(r):
    p=()
    while sum(p) < r: p = (*p, min(r-sum(p), 4))
    return p

# (a) step/sync at placements, including ones not measured (scattered interpolation)
rows=[]
for name, app in APPLICATIONS.items():
    lo, hi = int(app.min_local_bsz), int(app.max_local_bsz)
    for placement in [(1,),(2,),(4,),(2,2),(4,4),(1,3),(2,2,4,4,4),(4,)*5,(4,)*6,(4,)*8,(2,)*8,(4,)*12,(4,)*16,(3,)*7,(1,)*10]:
        # Per-GPU batches a job can run at: its total batch is at most the
        # largest validated one.
        cap = min(hi, int(app.max_batch_size) // sum(placement))
        for b in sorted(set(x for x in [lo, (lo+hi)//2, hi, cap] if lo <= x <= cap)):
            try:
                s, y = app.get_throughput(placement, b)
            except Exception as e:
                continue
            if s == s:
                rows.append([name, '-'.join(map(str,placement)), b, repr(float(s)), repr(float(y))])
with open('throughput.csv','w') as f:
    w=csv.writer(f); w.writerow(['model','placement','local_bsz','step_time','sync_time']); w.writerows(rows)

# (b) a job alone at a fixed placement and batch size, stepped as the artifact does
rows=[]
wl = pandas.read_csv('workloads/workload-6.csv')
seen=set()
for r in wl.itertuples():
    key=(r.application, r.num_replicas, r.batch_size)
    if key in seen: continue
    seen.add(key)
    job = Job(r.name, APPLICATIONS[r.application], 0, target_num_replicas=r.num_replicas, target_batch_size=r.batch_size)
    job.reallocate(list(packed(r.num_replicas)))
    job.rescale_time = 0
    while job.completion_time is None:
        job.step(60)
    rows.append([r.application, r.num_replicas, r.batch_size, job.completion_time])
with open('alone.csv','w') as f:
    w=csv.writer(f); w.writerow(['model','replicas','batch_size','completion_s']); w.writerows(rows)

# A model of the finisher's file work per step (a decided file via tmp+rename, five objects,
# the pending file removed), unlinked against recycled as the next temporary file.
# python3 benches/probe/fs_churn.py unlink|recycle DIR N
import os, time, sys
mode = sys.argv[1]; base = sys.argv[2]; N = int(sys.argv[3])
for d in ("tmp", "pending", "obj", "spare"): os.makedirs(f"{base}/{d}", exist_ok=True)
data = os.urandom(1500); spares = []
t0 = time.perf_counter(); lat = []
for i in range(N):
    s = time.perf_counter()
    # a step: decided file created via tmp+rename, 5 objects created, the pending file removed
    if mode == "recycle" and spares:
        t = spares.pop(); fd = os.open(t, os.O_WRONLY | os.O_TRUNC)
    else:
        t = f"{base}/tmp/t{i}"; fd = os.open(t, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, data); os.close(fd); os.rename(t, f"{base}/pending/p{i}")
    for k in range(5):
        fd = os.open(f"{base}/obj/o{i}-{k}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600); os.write(fd, data); os.close(fd)
    if mode == "recycle":
        sp = f"{base}/spare/s{i}"; os.rename(f"{base}/pending/p{i}", sp); spares.append(sp)
    else:
        os.unlink(f"{base}/pending/p{i}")
    lat.append(time.perf_counter() - s)
el = time.perf_counter() - t0
print(mode, "%.0f steps/s, last 1000 mean %.3f ms" % (N / el, sum(lat[-1000:]) / 1000 * 1e3))

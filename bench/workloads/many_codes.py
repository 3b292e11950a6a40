"""100,000 distinct code objects, each run once: memory per trampoline.
Prints peak RSS and the executable trampoline arenas' size."""
import resource


def arena_bytes():
    total = 0
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) == 5 and fields[1] == "r-xp":
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                total += hi - lo
    return total


src = "\n".join(f"def f{i}():\n    return {i}" for i in range(100_000))
ns = {}
exec(src, ns)
for i in range(100_000):
    ns[f"f{i}"]()
print("peak_rss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
print("anon_exec_bytes", arena_bytes())

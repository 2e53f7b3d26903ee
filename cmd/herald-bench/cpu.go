package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU accounting from /proc (Linux). Everything runs on one machine, so where the
// CPU goes per operation — this process (bench client + in-process API + worker),
// the Temporal server, PostgreSQL — explains most throughput differences. Where
// /proc is unavailable the numbers are simply omitted.

const clockTick = 100 // USER_HZ; 100 on every Linux this runs on

// CPUUsage is one phase's CPU consumption.
type CPUUsage struct {
	// MachineUtilPct is busy/total over all CPUs during the phase (100 = every CPU busy).
	MachineUtilPct float64 `json:"machine_util_pct"`
	// PerOpMs is CPU milliseconds per successful operation by process group:
	// bench (this process), temporal (the Temporal server at HERALD_TEMPORAL_ADDRESS),
	// postgres (the cluster at HERALD_DATABASE_URL), other (the rest of the machine's
	// busy time) and machine (all busy CPU time).
	PerOpMs map[string]float64 `json:"per_op_ms"`
}

type cpuSnap struct {
	ok          bool
	busy, total uint64            // machine jiffies
	groups      map[string]uint64 // group → jiffies
}

// cpuWatcher knows which processes are the Temporal server and the PostgreSQL cluster.
type cpuWatcher struct {
	self                 int
	temporalPort, pgPort string
}

func newCPUWatcher(temporalAddr, databaseURL string) *cpuWatcher {
	w := &cpuWatcher{self: os.Getpid()}
	if i := strings.LastIndexByte(temporalAddr, ':'); i >= 0 {
		w.temporalPort = temporalAddr[i+1:]
	}
	w.pgPort = pgPort(databaseURL)
	return w
}

// pgPort extracts the port of a postgres:// URL ("5432" when none is given).
func pgPort(u string) string {
	rest := u
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.HasSuffix(rest, "]") {
		return rest[i+1:]
	}
	return "5432"
}

type procStat struct {
	pid, ppid int
	comm      string
	jiffies   uint64
}

// parseProcStat parses /proc/<pid>/stat: "pid (comm) state ppid ... utime stime ...".
func parseProcStat(b []byte) (procStat, bool) {
	open, closeP := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || closeP < open {
		return procStat{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b[:open])))
	if err != nil {
		return procStat{}, false
	}
	f := strings.Fields(string(b[closeP+1:]))
	// f[0] is field 3 (state); field k is f[k-3]: ppid=4, utime=14, stime=15.
	if len(f) < 13 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return procStat{pid: pid, ppid: ppid, comm: string(b[open+1 : closeP]), jiffies: ut + st}, true
}

func cmdlineHasPort(pid int, port string) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || port == "" {
		return false
	}
	args := strings.Split(string(raw), "\x00")
	for i, a := range args {
		if (a == "-p" || a == "--port") && i+1 < len(args) && args[i+1] == port {
			return true
		}
		if a == "--port="+port || a == "-p"+port {
			return true
		}
	}
	return false
}

func (w *cpuWatcher) snap() cpuSnap {
	s := cpuSnap{groups: map[string]uint64{}}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return s
	}
	var v [10]uint64
	for i := 1; i < len(f) && i <= 10; i++ {
		v[i-1], _ = strconv.ParseUint(f[i], 10, 64)
	}
	// user nice system idle iowait irq softirq steal (guest is included in user).
	s.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	s.total = s.busy + v[3] + v[4]

	entries, err := os.ReadDir("/proc")
	if err != nil {
		return s
	}
	var procs []procStat
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		if p, ok := parseProcStat(b); ok {
			procs = append(procs, p)
		}
	}
	// Roots: the Temporal / PostgreSQL processes started with our ports. If none
	// match (e.g. a default port), every process of that name counts.
	roots := map[string]map[int]bool{"temporal": {}, "postgres": {}}
	for _, p := range procs {
		switch p.comm {
		case "temporal":
			if cmdlineHasPort(p.pid, w.temporalPort) {
				roots["temporal"][p.pid] = true
			}
		case "postgres":
			if cmdlineHasPort(p.pid, w.pgPort) {
				roots["postgres"][p.pid] = true
			}
		}
	}
	for _, p := range procs {
		g := "other"
		switch {
		case p.pid == w.self:
			g = "bench"
		case p.comm == "temporal" || p.comm == "postgres":
			r := roots[p.comm]
			if len(r) == 0 || r[p.pid] || r[p.ppid] {
				g = p.comm
			}
		}
		s.groups[g] += p.jiffies
	}
	s.ok = true
	return s
}

// cpuDelta is the CPU used between two snapshots, in jiffies.
type cpuDelta struct {
	busy, total uint64
	groups      map[string]uint64
}

// delta is b - a; ok is false when either snapshot is missing.
func delta(a, b cpuSnap) (cpuDelta, bool) {
	if !a.ok || !b.ok || b.total < a.total || b.busy < a.busy {
		return cpuDelta{}, false
	}
	d := cpuDelta{busy: b.busy - a.busy, total: b.total - a.total, groups: map[string]uint64{}}
	for _, g := range []string{"bench", "temporal", "postgres"} {
		if b.groups[g] >= a.groups[g] {
			d.groups[g] = b.groups[g] - a.groups[g]
		}
	}
	return d, true
}

func (d *cpuDelta) add(o cpuDelta) {
	if d.groups == nil {
		d.groups = map[string]uint64{}
	}
	d.busy += o.busy
	d.total += o.total
	for g, v := range o.groups {
		d.groups[g] += v
	}
}

// usage is the CPU per successful operation.
func (d cpuDelta) usage(ops int) *CPUUsage {
	if ops <= 0 || d.total == 0 {
		return nil
	}
	u := &CPUUsage{PerOpMs: map[string]float64{}}
	u.MachineUtilPct = roundTo(100*float64(d.busy)/float64(d.total), 1)
	perOp := func(j uint64) float64 {
		return roundTo(float64(j)*float64(time.Second/clockTick)/float64(time.Millisecond)/float64(ops), 3)
	}
	var ours uint64
	for _, g := range []string{"bench", "temporal", "postgres"} {
		u.PerOpMs[g] = perOp(d.groups[g])
		ours += d.groups[g]
	}
	u.PerOpMs["machine"] = perOp(d.busy)
	// other: everything else on the machine, including processes that came and went
	// between the snapshots (builds, other tests); non-zero means a noisy machine.
	u.PerOpMs["other"] = 0
	if d.busy > ours {
		u.PerOpMs["other"] = perOp(d.busy - ours)
	}
	return u
}

func roundTo(v float64, digits int) float64 {
	p := 1.0
	for range digits {
		p *= 10
	}
	return float64(int64(v*p+0.5)) / p
}

// ourJiffies is the CPU time of this process, the Temporal server and PostgreSQL.
func (s cpuSnap) ourJiffies() uint64 {
	return s.groups["bench"] + s.groups["temporal"] + s.groups["postgres"]
}

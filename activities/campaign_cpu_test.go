package activities_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPU accounting from /proc (Linux), as herald-bench does it: the services
// share the machine, so the CPU each part spends per recipient — this test
// process (API, worker and, in the fakes run, the provider fakes), the
// PostgreSQL cluster and the Temporal server the test uses — says what a run
// costs whatever else the machine is doing at the time.

// cpuGroups are jiffies (1/100 s) by group: "test", "postgres", "temporal",
// "other" (every other process), "busy" (the machine's busy time) and "total"
// (busy + idle, over every CPU).
type cpuGroups map[string]uint64

// cpuSnapshot reads the CPU used so far by each group; pgPort and temporalPort
// name the services of this test (the processes started with those ports and
// their children).
func cpuSnapshot(pgPort, temporalPort string) cpuGroups {
	out := cpuGroups{}
	if stat, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(stat), "\n")
		f := strings.Fields(line)
		var v [8]uint64
		for i := 1; i < len(f) && i <= 8; i++ {
			v[i-1], _ = strconv.ParseUint(f[i], 10, 64)
		}
		out["busy"] = v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
		out["total"] = out["busy"] + v[3] + v[4]
	}
	type proc struct {
		pid, ppid int
		comm      string
		jiffies   uint64
	}
	entries, _ := os.ReadDir("/proc")
	var procs []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		open, closeP := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || closeP < open {
			continue
		}
		f := strings.Fields(string(b[closeP+1:]))
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseUint(f[11], 10, 64)
		st, _ := strconv.ParseUint(f[12], 10, 64)
		procs = append(procs, proc{pid: pid, ppid: ppid, comm: string(b[open+1 : closeP]), jiffies: ut + st})
	}
	hasPort := func(pid int, port string) bool {
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil {
			return false
		}
		args := strings.Split(string(raw), "\x00")
		for i, a := range args {
			if (a == "-p" || a == "--port") && i+1 < len(args) && args[i+1] == port {
				return true
			}
		}
		return false
	}
	roots := map[int]string{}
	for _, p := range procs {
		if (p.comm == "postgres" && hasPort(p.pid, pgPort)) || (p.comm == "temporal" && hasPort(p.pid, temporalPort)) {
			roots[p.pid] = p.comm
		}
	}
	self := os.Getpid()
	for _, p := range procs {
		switch {
		case p.pid == self:
			out["test"] += p.jiffies
		case roots[p.pid] != "":
			out[roots[p.pid]] += p.jiffies
		case roots[p.ppid] != "":
			out[roots[p.ppid]] += p.jiffies
		default:
			out["other"] += p.jiffies
		}
	}
	return out
}

// minus is the CPU used between an earlier snapshot and g.
func (g cpuGroups) minus(earlier cpuGroups) cpuGroups {
	out := cpuGroups{}
	for k, v := range g {
		if v >= earlier[k] {
			out[k] = v - earlier[k]
		}
	}
	return out
}

// portOf is the port of a host:port or a postgres:// URL.
func portOf(addr string) string {
	if i := strings.Index(addr, "://"); i >= 0 {
		addr = addr[i+3:]
	}
	if i := strings.IndexAny(addr, "/?"); i >= 0 {
		addr = addr[:i]
	}
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return "5432"
}

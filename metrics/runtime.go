package metrics

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The Go runtime's families (go_*), under the names, types and HELP texts
// client_golang 1.25's collectors.NewGoCollector() gives them with its
// default options (prometheus/go_collector.go, go_collector_latest.go), so
// that dashboards made for any Go program keep working: the memstats
// families computed from runtime/metrics as client_golang does (no
// stop-the-world ReadMemStats), the three runtime/metrics families it
// writes by default, goroutines, threads, the GC pauses and go_info.

// Names of runtime/metrics read at each scrape.
const (
	rmTinyAllocs    = "/gc/heap/tiny/allocs:objects"
	rmAllocsObjects = "/gc/heap/allocs:objects"
	rmFreesObjects  = "/gc/heap/frees:objects"
	rmAllocsBytes   = "/gc/heap/allocs:bytes"
	rmHeapObjects   = "/gc/heap/objects:objects"
	rmHeapGoal      = "/gc/heap/goal:bytes"
	rmTotal         = "/memory/classes/total:bytes"
	rmHeapObjBytes  = "/memory/classes/heap/objects:bytes"
	rmHeapUnused    = "/memory/classes/heap/unused:bytes"
	rmHeapReleased  = "/memory/classes/heap/released:bytes"
	rmHeapFree      = "/memory/classes/heap/free:bytes"
	rmHeapStacks    = "/memory/classes/heap/stacks:bytes"
	rmOSStacks      = "/memory/classes/os-stacks:bytes"
	rmMSpanInuse    = "/memory/classes/metadata/mspan/inuse:bytes"
	rmMSpanFree     = "/memory/classes/metadata/mspan/free:bytes"
	rmMCacheInuse   = "/memory/classes/metadata/mcache/inuse:bytes"
	rmMCacheFree    = "/memory/classes/metadata/mcache/free:bytes"
	rmProfBuckets   = "/memory/classes/profiling/buckets:bytes"
	rmMetadataOther = "/memory/classes/metadata/other:bytes"
	rmOther         = "/memory/classes/other:bytes"
	rmGOGC          = "/gc/gogc:percent"
	rmGOMEMLIMIT    = "/gc/gomemlimit:bytes"
	rmGOMAXPROCS    = "/sched/gomaxprocs:threads"
	memstatsPrefix  = "go_memstats_"
)

// rmValues are the runtime/metrics values of one scrape, by name; a name
// this Go does not know reads 0.
type rmValues map[string]uint64

func (v rmValues) sum(names ...string) float64 {
	var n uint64
	for _, name := range names {
		n += v[name]
	}
	return float64(n)
}

// memstat is a go_memstats_* family and how it is computed (as
// client_golang's memStatsFromRM fills a runtime.MemStats).
type memstat struct {
	d   *desc
	val func(rmValues) float64
}

// runtimeCollector writes the go_* families.
type runtimeCollector struct {
	samples    []metrics.Sample
	memstats   []memstat
	rmGauges   []memstat
	goroutines *desc
	threads    *desc
	gc         *desc
	lastGC     *desc
	info       *desc
}

func newRuntimeCollector() *runtimeCollector {
	ms := func(name, typ, help string, val func(rmValues) float64) memstat {
		return memstat{d: newDesc(memstatsPrefix+name, typ, help), val: val}
	}
	sum := func(names ...string) func(rmValues) float64 {
		return func(v rmValues) float64 { return v.sum(names...) }
	}
	c := &runtimeCollector{
		memstats: []memstat{
			ms("alloc_bytes", typeGauge, "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.",
				sum(rmHeapObjBytes)),
			ms("alloc_bytes_total", typeCounter, "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.",
				sum(rmAllocsBytes)),
			ms("sys_bytes", typeGauge, "Number of bytes obtained from system. Equals to /memory/classes/total:byte.",
				sum(rmTotal)),
			ms("mallocs_total", typeCounter, "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.",
				sum(rmAllocsObjects, rmTinyAllocs)),
			ms("frees_total", typeCounter, "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.",
				sum(rmFreesObjects, rmTinyAllocs)),
			ms("heap_alloc_bytes", typeGauge, "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.",
				sum(rmHeapObjBytes)),
			ms("heap_sys_bytes", typeGauge, "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.",
				sum(rmHeapObjBytes, rmHeapUnused, rmHeapReleased, rmHeapFree)),
			ms("heap_idle_bytes", typeGauge, "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.",
				sum(rmHeapReleased, rmHeapFree)),
			ms("heap_inuse_bytes", typeGauge, "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes",
				sum(rmHeapObjBytes, rmHeapUnused)),
			ms("heap_released_bytes", typeGauge, "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.",
				sum(rmHeapReleased)),
			ms("heap_objects", typeGauge, "Number of currently allocated objects. Equals to /gc/heap/objects:objects.",
				sum(rmHeapObjects)),
			ms("stack_inuse_bytes", typeGauge, "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.",
				sum(rmHeapStacks)),
			ms("stack_sys_bytes", typeGauge, "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.",
				sum(rmHeapStacks, rmOSStacks)),
			ms("mspan_inuse_bytes", typeGauge, "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.",
				sum(rmMSpanInuse)),
			ms("mspan_sys_bytes", typeGauge, "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.",
				sum(rmMSpanInuse, rmMSpanFree)),
			ms("mcache_inuse_bytes", typeGauge, "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.",
				sum(rmMCacheInuse)),
			ms("mcache_sys_bytes", typeGauge, "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.",
				sum(rmMCacheInuse, rmMCacheFree)),
			ms("buck_hash_sys_bytes", typeGauge, "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.",
				sum(rmProfBuckets)),
			ms("gc_sys_bytes", typeGauge, "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.",
				sum(rmMetadataOther)),
			ms("other_sys_bytes", typeGauge, "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.",
				sum(rmOther)),
			ms("next_gc_bytes", typeGauge, "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.",
				sum(rmHeapGoal)),
		},
		goroutines: newDesc("go_goroutines", typeGauge, "Number of goroutines that currently exist."),
		threads:    newDesc("go_threads", typeGauge, "Number of OS threads created."),
		gc:         newDesc("go_gc_duration_seconds", typeSummary, "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles."),
		lastGC:     newDesc("go_memstats_last_gc_time_seconds", typeGauge, "Number of seconds since 1970 of last garbage collection."),
		info:       newDesc("go_info", typeGauge, "Information about the Go environment.", "version"),
	}

	// The runtime/metrics families client_golang writes by default: named
	// from the metric's name, their HELP the runtime's description.
	help := map[string]string{}
	for _, d := range metrics.All() {
		help[d.Name] = d.Description
	}
	for _, g := range []struct{ name, rm string }{
		{"go_gc_gogc_percent", rmGOGC},
		{"go_gc_gomemlimit_bytes", rmGOMEMLIMIT},
		{"go_sched_gomaxprocs_threads", rmGOMAXPROCS},
	} {
		if h, ok := help[g.rm]; ok {
			c.rmGauges = append(c.rmGauges, memstat{d: newDesc(g.name, typeGauge, h+" Sourced from "+g.rm+"."), val: sum(g.rm)})
		}
	}

	for _, name := range []string{rmTinyAllocs, rmAllocsObjects, rmFreesObjects, rmAllocsBytes, rmHeapObjects, rmHeapGoal,
		rmTotal, rmHeapObjBytes, rmHeapUnused, rmHeapReleased, rmHeapFree, rmHeapStacks, rmOSStacks, rmMSpanInuse,
		rmMSpanFree, rmMCacheInuse, rmMCacheFree, rmProfBuckets, rmMetadataOther, rmOther, rmGOGC, rmGOMEMLIMIT, rmGOMAXPROCS} {
		c.samples = append(c.samples, metrics.Sample{Name: name})
	}
	return c
}

// collect adds the go_* families to e. Scrapes may run at once: each reads
// into samples of its own.
func (c *runtimeCollector) collect(e *exposition) {
	samples := append([]metrics.Sample(nil), c.samples...)
	metrics.Read(samples)
	v := make(rmValues, len(samples))
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[s.Name] = s.Value.Uint64()
		}
	}
	for _, m := range c.memstats {
		e.add(m.d, m.val(v))
	}
	for _, m := range c.rmGauges {
		e.add(m.d, m.val(v))
	}

	e.add(c.goroutines, float64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	e.add(c.threads, float64(threads))

	// The pauses' minimum, quartiles and maximum, as quantiles 0 to 1.
	var st debug.GCStats
	st.PauseQuantiles = make([]time.Duration, 5)
	debug.ReadGCStats(&st)
	s := summary{sum: st.PauseTotal.Seconds(), count: uint64(st.NumGC)}
	for i, q := range st.PauseQuantiles {
		s.quantiles = append(s.quantiles, [2]float64{float64(i) / 4, q.Seconds()})
	}
	e.addSummary(c.gc, s)
	e.add(c.lastGC, float64(st.LastGC.UnixNano())/1e9)
	e.add(c.info, 1, runtime.Version())
}

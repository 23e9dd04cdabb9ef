package collector

// The pure half of the GPU exporter collector: a metrics page of NVIDIA's
// dcgm-exporter or AMD's device-metrics-exporter in, one event.GPUDevice
// per GPU (or MIG instance, or compute partition) out. The fetching is in
// gpu_exporter.go.

import (
	"cmp"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/latscope/latscope/event"
)

// ErrNoGPUMetrics is returned for a page that parses but holds neither
// dcgm-exporter's nor device-metrics-exporter's GPU metrics (a server's own
// /metrics, say).
var ErrNoGPUMetrics = errors.New("no DCGM or AMD GPU metrics on the page")

// ParseGPUMetrics reads one exporter page in the Prometheus text format
// and returns its GPUs, sorted by host, index and partition. Which
// exporter wrote it is told by the metric names: DCGM_FI_* (dcgm-exporter)
// or gpu_* (AMD). Source, Host, Pods and the figures are filled in;
// SourceURL is left to the caller. A page with no GPU metric is
// ErrNoGPUMetrics.
func ParseGPUMetrics(r io.Reader) ([]event.GPUDevice, error) {
	s, err := ParseProm(r)
	if errors.Is(err, ErrNoMetrics) {
		return nil, ErrNoGPUMetrics
	}
	if err != nil {
		return nil, err
	}
	return gpuDevicesFromScrape(s)
}

// gpuDevicesFromScrape picks the GPUs out of a parsed page.
func gpuDevicesFromScrape(s *Scrape) ([]event.GPUDevice, error) {
	devs := gpuDevicesOf(s, dcgmLayout)
	devs = append(devs, gpuDevicesOf(s, amdLayout)...)
	if len(devs) == 0 {
		return nil, ErrNoGPUMetrics
	}
	slices.SortStableFunc(devs, func(a, b event.GPUDevice) int {
		return cmp.Or(cmp.Compare(a.Host, b.Host), cmp.Compare(a.Index, b.Index), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.UUID, b.UUID))
	})
	return devs, nil
}

// gpuLayout is what one exporter's page looks like: which label names a
// GPU, and which metric holds which figure.
type gpuLayout struct {
	source string
	fields map[string]gpuField // by metric name
	// identify reads a series' labels: the key that tells its GPU apart on
	// the page, and the device's identity (index, name, UUID, host,
	// partition). ok is false for a series that is not about one GPU.
	identify func(labels map[string]string) (key string, d event.GPUDevice, ok bool)
	// finish turns the figures gathered for one GPU into the device.
	finish func(d *event.GPUDevice, v gpuValues)
}

// gpuField is one figure a metric holds. rank orders metrics that hold the
// same figure (lower wins: AMD's package power before its power usage);
// keep says which of several series of one metric for one GPU counts.
type gpuField struct {
	figure string
	rank   int
	keep   func(labels map[string]string) bool // nil: every series
}

// gpuValues holds one GPU's figures by name, each with the rank of the
// metric it came from.
type gpuValues map[string]gpuValue

type gpuValue struct {
	v       float64
	rank    int
	podless bool // read from a series without a pod label
	all     []float64
}

// The figures a page can give.
const (
	figUtil      = "util"       // percent
	figUtilMem   = "util_mem"   // percent
	figMemUsed   = "mem_used"   // MiB
	figMemFree   = "mem_free"   // MiB
	figMemRes    = "mem_res"    // MiB
	figMemTotal  = "mem_total"  // MiB
	figPower     = "power"      // W
	figPowerCap  = "power_cap"  // W
	figTemp      = "temp"       // °C
	figClock     = "clock"      // MHz
	figClockMax  = "clock_max"  // MHz
	figReasons   = "reasons"    // NVML's clock-event bit mask
	figGrActive  = "gr_active"  // ratio 0..1
	figSMActive  = "sm_active"  // ratio 0..1
	figTensor    = "tensor"     // ratio 0..1
	figDRAM      = "dram"       // ratio 0..1
	figGrPct     = "gr_pct"     // percent (AMD)
	figTensorPct = "tensor_pct" // percent (AMD)
)

// gpuDevicesOf gathers the GPUs that one exporter's metrics describe on
// the page: every series of a known metric is filed under its GPU.
func gpuDevicesOf(s *Scrape, l *gpuLayout) []event.GPUDevice {
	type gathered struct {
		dev  event.GPUDevice
		vals gpuValues
	}
	byKey := map[string]*gathered{}
	var order []string
	for name, f := range s.Families {
		field, ok := l.fields[name]
		if !ok {
			continue
		}
		for _, sr := range f.Series {
			if field.keep != nil && !field.keep(sr.Labels) {
				continue
			}
			key, d, ok := l.identify(sr.Labels)
			if !ok {
				continue
			}
			g := byKey[key]
			if g == nil {
				g = &gathered{dev: d, vals: gpuValues{}}
				byKey[key] = g
				order = append(order, key)
			}
			g.dev.Pods = addGPUPod(g.dev.Pods, sr.Labels)
			g.vals.add(field, sr.Value, gpuPodOf(sr.Labels) == nil)
		}
	}
	devs := make([]event.GPUDevice, 0, len(order))
	for _, key := range order {
		g := byKey[key]
		g.dev.Source = l.source
		slices.SortFunc(g.dev.Pods, func(a, b event.GPUPod) int {
			return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Container, b.Container))
		})
		l.finish(&g.dev, g.vals)
		devs = append(devs, g.dev)
	}
	return devs
}

// add files one series' value. A value from a better-ranked metric wins;
// within one metric a series without a pod label wins over the copies
// that dcgm-exporter adds for each pod sharing the GPU (for utilisation
// and memory those carry the pod's own share, not the GPU's), and
// otherwise the first series counts. Every value is kept in all, for the
// figures that combine several series (AMD's clocks).
func (vs gpuValues) add(f gpuField, v float64, podless bool) {
	cur, ok := vs[f.figure]
	switch {
	case !ok || f.rank < cur.rank:
		vs[f.figure] = gpuValue{v: v, rank: f.rank, podless: podless, all: []float64{v}}
	case f.rank == cur.rank:
		if podless && !cur.podless {
			cur.v, cur.podless = v, true
		}
		cur.all = append(cur.all, v)
		vs[f.figure] = cur
	}
}

// get returns a figure and whether the page had it.
func (vs gpuValues) get(figure string) (float64, bool) {
	v, ok := vs[figure]
	return v.v, ok
}

// gpuPodOf reads the Kubernetes labels both exporters add (dcgm-exporter's
// older pod_name, pod_namespace and container_name too); nil when the
// series carries no pod.
func gpuPodOf(labels map[string]string) *event.GPUPod {
	first := func(names ...string) string {
		for _, n := range names {
			if v := labels[n]; v != "" {
				return v
			}
		}
		return ""
	}
	p := event.GPUPod{Pod: first("pod", "pod_name")}
	if p.Pod == "" {
		return nil
	}
	p.Namespace = first("namespace", "pod_namespace")
	p.Container = first("container", "container_name")
	return &p
}

// maxGPUPods bounds the pods kept for one GPU: a page that maps hundreds
// of pods to one GPU cannot grow a sample without bound.
const maxGPUPods = 16

func addGPUPod(pods []event.GPUPod, labels map[string]string) []event.GPUPod {
	p := gpuPodOf(labels)
	if p == nil || len(pods) >= maxGPUPods || slices.Contains(pods, *p) {
		return pods
	}
	return append(pods, *p)
}

// dcgmLayout reads dcgm-exporter's page: metrics named after DCGM's fields
// (etc/default-counters.csv and dcp-metrics-included.csv in its
// repository), each series labelled gpu, UUID, device, modelName,
// Hostname (hostname from 4.5), GPU_I_PROFILE and GPU_I_ID for a MIG
// instance, and pod, namespace, container where it maps pods.
var dcgmLayout = &gpuLayout{
	source: event.GPUSourceDCGM,
	fields: map[string]gpuField{
		"DCGM_FI_DEV_GPU_UTIL":               {figure: figUtil},
		"DCGM_FI_DEV_MEM_COPY_UTIL":          {figure: figUtilMem},
		"DCGM_FI_DEV_FB_USED":                {figure: figMemUsed},
		"DCGM_FI_DEV_FB_FREE":                {figure: figMemFree},
		"DCGM_FI_DEV_FB_RESERVED":            {figure: figMemRes},
		"DCGM_FI_DEV_FB_TOTAL":               {figure: figMemTotal},
		"DCGM_FI_DEV_POWER_USAGE":            {figure: figPower},
		"DCGM_FI_DEV_ENFORCED_POWER_LIMIT":   {figure: figPowerCap},
		"DCGM_FI_DEV_POWER_MGMT_LIMIT":       {figure: figPowerCap, rank: 1},
		"DCGM_FI_DEV_GPU_TEMP":               {figure: figTemp},
		"DCGM_FI_DEV_SM_CLOCK":               {figure: figClock},
		"DCGM_FI_DEV_MAX_SM_CLOCK":           {figure: figClockMax},
		"DCGM_FI_DEV_CLOCKS_EVENT_REASONS":   {figure: figReasons},
		"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": {figure: figReasons, rank: 1},
		"DCGM_FI_PROF_GR_ENGINE_ACTIVE":      {figure: figGrActive},
		"DCGM_FI_PROF_SM_ACTIVE":             {figure: figSMActive},
		"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":    {figure: figTensor},
		"DCGM_FI_PROF_DRAM_ACTIVE":           {figure: figDRAM},
	},
	identify: dcgmIdentify,
	finish:   dcgmFinish,
}

func dcgmIdentify(labels map[string]string) (string, event.GPUDevice, bool) {
	uuid := cmp.Or(labels["UUID"], labels["uuid"])
	gpu, hasGPU := labels["gpu"]
	if uuid == "" && !hasGPU {
		return "", event.GPUDevice{}, false
	}
	d := event.GPUDevice{
		Index: gpuIndexLabel(gpu),
		Name:  labels["modelName"],
		UUID:  uuid,
		Host:  cmp.Or(labels["hostname"], labels["Hostname"]),
	}
	if id := labels["GPU_I_ID"]; id != "" || labels["GPU_I_PROFILE"] != "" {
		d.Partition = strings.TrimSpace("MIG " + labels["GPU_I_PROFILE"] + " #" + id)
	}
	key := strings.Join([]string{d.Host, uuid, gpu, labels["GPU_I_ID"]}, "\x00")
	return key, d, true
}

func dcgmFinish(d *event.GPUDevice, vs gpuValues) {
	gpuCoreFigures(d, vs)
	const mib = 1 << 20
	used, hasUsed := gpuFigure(d, vs, figMemUsed, "memory used")
	d.MemUsed = uint64(used * mib)
	switch {
	case vs.has(figMemTotal):
		total, _ := gpuFigure(d, vs, figMemTotal, "memory total")
		d.MemTotal = uint64(total * mib)
	case hasUsed && vs.has(figMemFree):
		// NVML's total is used + free + reserved (drivers from R510 on).
		free, _ := gpuFigure(d, vs, figMemFree, "memory free")
		res, _ := gpuFigure(d, vs, figMemRes, "memory reserved")
		d.MemTotal = uint64((used + free + res) * mib)
	default:
		d.Errors = append(d.Errors, "memory total: not exported")
	}
	if v, ok := vs.get(figReasons); ok && !dcgmBlank(v) && v >= 0 && v < 1<<53 {
		d.ThrottleReason = decodeClockReasons(uint64(v))
	}
	d.GrEngineActive = gpuRatio(vs, figGrActive, 1)
	d.SMActive = gpuRatio(vs, figSMActive, 1)
	d.TensorActive = gpuRatio(vs, figTensor, 1)
	d.DRAMActive = gpuRatio(vs, figDRAM, 1)
}

// gpuCoreFigures fills the figures both exporters give the same way.
func gpuCoreFigures(d *event.GPUDevice, vs gpuValues) {
	util, _ := gpuFigure(d, vs, figUtil, "utilization")
	d.UtilGPU = gpuU32(min(util, 100))
	if v, ok := vs.get(figUtilMem); ok && gpuUsable(v) {
		d.UtilMem = gpuU32(min(v, 100))
	}
	power, _ := gpuFigure(d, vs, figPower, "power")
	d.PowerMilliW = gpuU32(power * 1000)
	if v, ok := vs.get(figPowerCap); ok && gpuUsable(v) {
		d.PowerLimitMW = gpuU32(v * 1000)
	}
	temp, _ := gpuFigure(d, vs, figTemp, "temperature")
	d.TempC = gpuU32(temp)
	clock, _ := gpuFigure(d, vs, figClock, "clock")
	d.SMClockMHz = gpuU32(clock)
	if v, ok := vs.get(figClockMax); ok && gpuUsable(v) {
		d.SMClockMaxMHz = gpuU32(v)
	}
}

func (vs gpuValues) has(figure string) bool { _, ok := vs[figure]; return ok }

// gpuFigure returns a figure the panel always shows, noting on the device
// when the page lacks it or gives a value that cannot be one (DCGM's
// "blank" markers for a field the GPU does not support, a negative or
// huge number): the figure then reads 0 with the reason beside it, as
// NVML's do.
func gpuFigure(d *event.GPUDevice, vs gpuValues, figure, what string) (float64, bool) {
	v, ok := vs.get(figure)
	switch {
	case !ok:
		d.Errors = append(d.Errors, what+": not exported")
		return 0, false
	case !gpuUsable(v):
		d.Errors = append(d.Errors, what+": not supported")
		return 0, false
	}
	return v, true
}

// gpuUsable says whether v can be a figure: finite (the parser already
// dropped NaN and ±Inf), not negative, and not one of DCGM's blanks.
func gpuUsable(v float64) bool { return v >= 0 && !dcgmBlank(v) && v < math.MaxUint32 }

// dcgmBlank recognises DCGM's markers for a value that is missing, not
// supported or not permitted (DCGM_INT32_BLANK and the three after it,
// likewise DCGM_FP64_BLANK = 2^47, and DCGM_INT64_BLANK = 2^63-16 and up,
// which a float64 cannot tell apart). dcgm-exporter drops them from 4.x
// on; earlier versions print them, as its README's sample shows.
func dcgmBlank(v float64) bool {
	const int32Blank, fp64Blank = 0x7ffffff0, 1 << 47
	return v >= int32Blank && v <= int32Blank+3 || v >= fp64Blank && v <= fp64Blank+3 || v >= 0x7ffffffffffffff0
}

// gpuU32 converts a checked figure (0 <= v < 2^32 once scaled; anything
// else reads 0) to the device's integer fields.
func gpuU32(v float64) uint32 {
	if !(v >= 0) || v >= math.MaxUint32 {
		return 0
	}
	return uint32(math.Round(v))
}

// gpuRatio returns a figure as a fraction 0..1 (scale is what 1 reads as
// on the page: 1 for DCGM's ratios, 100 for AMD's percentages), or nil.
func gpuRatio(vs gpuValues, figure string, scale float64) *float64 {
	v, ok := vs.get(figure)
	if !ok || !gpuUsable(v) {
		return nil
	}
	r := min(v/scale, 1)
	return &r
}

// gpuIndexLabel reads a GPU index label; -1 when it is not a number.
func gpuIndexLabel(s string) int {
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// amdLayout reads AMD device-metrics-exporter's page: lower-case metric
// names (docs/configuration/metricslist.md in its repository), each
// series labelled gpu_id, gpu_partition_id, gpu_compute_partition_type,
// card_model, serial_number, hostname, pod, namespace, container (and
// gpu_uuid where enabled). Power, temperature and clocks exist under
// different names on MI2xx and MI3xx, so the better one present counts.
var amdLayout = &gpuLayout{
	source: event.GPUSourceAMD,
	fields: map[string]gpuField{
		"gpu_gfx_activity":               {figure: figUtil},
		"gpu_umc_activity":               {figure: figUtilMem},
		"gpu_used_vram":                  {figure: figMemUsed},
		"gpu_total_vram":                 {figure: figMemTotal},
		"gpu_package_power":              {figure: figPower},
		"gpu_power_usage":                {figure: figPower, rank: 1},
		"gpu_average_package_power":      {figure: figPower, rank: 2},
		"gpu_junction_temperature":       {figure: figTemp},
		"gpu_edge_temperature":           {figure: figTemp, rank: 1},
		"gpu_clock":                      {figure: figClock, keep: amdSystemClock},
		"gpu_max_clock":                  {figure: figClockMax, keep: amdSystemClock},
		"gpu_prof_gui_util_percent":      {figure: figGrPct},
		"gpu_prof_tensor_active_percent": {figure: figTensorPct},
	},
	identify: amdIdentify,
	finish:   amdFinish,
}

// amdSystemClock keeps the graphics clocks (clock_type "system", one per
// compute die on an MI300), not the memory, fabric or video ones.
func amdSystemClock(labels map[string]string) bool { return labels["clock_type"] == "system" }

func amdIdentify(labels map[string]string) (string, event.GPUDevice, bool) {
	id, ok := labels["gpu_id"]
	if !ok {
		return "", event.GPUDevice{}, false
	}
	d := event.GPUDevice{
		Index: gpuIndexLabel(id),
		Name:  labels["card_model"],
		UUID:  labels["gpu_uuid"],
		Host:  labels["hostname"],
	}
	part := labels["gpu_partition_id"]
	if mode := labels["gpu_compute_partition_type"]; mode != "" && !strings.EqualFold(mode, "spx") {
		d.Partition = strings.ToUpper(mode) + " #" + part
	}
	key := strings.Join([]string{d.Host, id, part}, "\x00")
	return key, d, true
}

func amdFinish(d *event.GPUDevice, vs gpuValues) {
	// An MI300 reports one graphics clock per compute die: the panel
	// shows their mean, and the highest of their maxima.
	if v, ok := vs[figClock]; ok {
		v.v = gpuCombineUsable(v.all, false)
		vs[figClock] = v
	}
	if v, ok := vs[figClockMax]; ok {
		v.v = gpuCombineUsable(v.all, true)
		vs[figClockMax] = v
	}
	gpuCoreFigures(d, vs)
	const mib = 1 << 20 // amd-smi's "MB" are MiB: an MI300X's 192 GiB read 196592 (less a reserve)
	used, _ := gpuFigure(d, vs, figMemUsed, "memory used")
	d.MemUsed = uint64(used * mib)
	total, _ := gpuFigure(d, vs, figMemTotal, "memory total")
	d.MemTotal = uint64(total * mib)
	d.GrEngineActive = gpuRatio(vs, figGrPct, 100)
	d.TensorActive = gpuRatio(vs, figTensorPct, 100)
}

// gpuCombineUsable is the mean (or the highest) of the usable values, or
// -1 (not usable) when there is none.
func gpuCombineUsable(vals []float64, highest bool) float64 {
	sum, n, top := 0.0, 0, -1.0
	for _, v := range vals {
		if gpuUsable(v) {
			sum += v
			n++
			top = max(top, v)
		}
	}
	switch {
	case n == 0:
		return -1
	case highest:
		return top
	}
	return sum / float64(n)
}

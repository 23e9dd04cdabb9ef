package tui

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/latscope/latscope/event"
)

// renderGPU draws the GPU panel, like nvitop: one line per device with
// utilisation, memory, power, temperature, clock and throttle reasons, and
// short histories when histories is set; or the one line saying why there
// is no GPU to show.
func renderGPU(st *styles, g *event.GPUSample, hist *gpuHistory, histories bool, width, height int) []string {
	title := st.title.Render("GPU")
	if g != nil && g.Simulated {
		title += " · " + st.warn.Render("SIMULATED")
	}
	lines := []string{rule(st, title, width)}
	switch {
	case g == nil:
		return append(lines, fit(st.dim.Render(" no GPU sample yet"), width))
	case !g.Available:
		reason := g.Reason
		if reason == "" {
			reason = "NVML unavailable"
		}
		return append(lines, fit(" "+st.warn.Render(reason), width))
	case len(g.Devices) == 0:
		return append(lines, fit(st.dim.Render(" no devices"), width))
	}
	buf := make([]float64, 0, gpuHistoryLen)
	labelW := 0 // one name column for every device, so their figures line up
	for _, d := range g.Devices {
		labelW = max(labelW, gpuLabelWidth(d))
	}
	per := 1
	if histories {
		per = 2
	}
	for i, d := range g.Devices {
		if len(lines)+per > height && i < len(g.Devices) {
			if len(lines) < height {
				lines = append(lines, fit(st.dim.Render(fmt.Sprintf(" +%d more GPUs (taller terminal to see them)", len(g.Devices)-i)), width))
			}
			break
		}
		if histories {
			l1, l2 := gpuLines(st, d, hist, i, width, labelW, buf)
			lines = append(lines, fit(l1, width), fit(l2, width))
		} else {
			lines = append(lines, fit(gpuCompact(st, d, width), width))
		}
	}
	return lines
}

// gpuLines is one device on two lines: utilisation and memory with their
// histories, then power, temperature, clock, the engines' activity where
// an exporter reports it, and throttle reasons. A GPU read from an
// exporter names its source and node under its name ("dcgm gpu-node-a").
// gpuLineWidth is the width of a device's first line for a name of nameW
// cells and histories of n.
func gpuLineWidth(nameW, n int) int { return 52 - 13 + max(nameW, 13) + 2*n }

func gpuLines(st *styles, d event.GPUDevice, hist *gpuHistory, i, width, labelW int, buf []float64) (string, string) {
	const fixed = 52 // the first line without its two sparklines, for a 13-cell name
	// The names (labelW, the widest) take what they need from the
	// sparklines, down to 1 cell each.
	name := gpuDisplayName(d)
	nameW := max(13, min(labelW, width-fixed+13-2))
	n := min(max((width-fixed-(nameW-13))/2, 1), gpuHistoryLen)
	var b strings.Builder
	fmt.Fprintf(&b, " %s %s ", gpuIndex(d), fit(name, nameW))
	b.WriteString(utilText(st, d.UtilGPU))
	b.WriteString(" " + st.accent.Render(spark(hist.series(buf, i, n, false), n)))
	fmt.Fprintf(&b, "  mem %s/%s GiB", gib(d.MemUsed), gib(d.MemTotal))
	b.WriteString(" " + st.accent.Render(spark(hist.series(buf, i, n, true), n)))
	power := fmt.Sprintf("%d W", d.PowerMilliW/1000)
	if d.PowerLimitMW > 0 {
		power = fmt.Sprintf("%d/%d W", d.PowerMilliW/1000, d.PowerLimitMW/1000)
	}
	second := strings.Repeat(" ", 4+nameW)
	if tag := gpuSourceTag(d); tag != "" {
		second = strings.Repeat(" ", 3) + st.dim.Render(fit(tag, nameW)) + " "
	}
	if d.Stale {
		second += st.warn.Render("stale") + "  " // its exporter's last scrape failed: these are older figures
	}
	second += fmt.Sprintf("%s  %d°C  %d MHz", power, d.TempC, d.SMClockMHz)
	// The activity figures go in whole or not at all, leaving a cell for
	// the "…" of trouble cut after them; the pods follow where a useful
	// part of a name fits.
	trouble := gpuTrouble(st, d)
	for _, a := range gpuActivity(d) {
		if visibleWidth(second)+2+len(a)+min(len(trouble), 1) > width {
			break
		}
		second += "  " + a
	}
	second += trouble
	if pods := gpuPods(st, d); pods != "" && visibleWidth(second)+min(visibleWidth(pods), 16) <= width {
		second += pods
	}
	return b.String(), second
}

// gpuCompact is one device on one short line, without histories: the
// name whole when it can be, leaving out temperature, then power, then
// memory, first; an exporter's GPU keeps its node.
func gpuCompact(st *styles, d event.GPUDevice, width int) string {
	name := gpuDisplayName(d)
	tail := []string{fmt.Sprintf("  %.0f/%.0fG", float64(d.MemUsed)/(1<<30), float64(d.MemTotal)/(1<<30)),
		fmt.Sprintf("  %dW", d.PowerMilliW/1000), fmt.Sprintf(" %d°C", d.TempC)}
	if host := gpuHost(d); host != "" {
		tail = append([]string{"  " + host}, tail...)
	}
	util := " " + utilPct(st, d.UtilGPU)
	if d.Stale {
		util += " " + st.warn.Render("stale")
	}
	head := func(nameW int) string { return fmt.Sprintf(" %s %s", gpuIndex(d), fit(name, nameW)) + util }
	for len(tail) > 1 && visibleWidth(head(visibleWidth(name))+strings.Join(tail, "")) > width {
		tail = tail[:len(tail)-1]
	}
	trouble := gpuTrouble(st, d)
	room := width - visibleWidth(head(0)+strings.Join(tail, "")) - min(len(trouble), 1) // a cell for the "…" of trouble cut
	return head(max(9, min(visibleWidth(name), room))) + strings.Join(tail, "") + trouble
}

// gpuIndex is a device's index, "?" when its exporter gave none.
func gpuIndex(d event.GPUDevice) string {
	if d.Index < 0 {
		return "?"
	}
	return fmt.Sprint(d.Index)
}

// gpuDisplayName is the device's short name, led by its partition (a MIG
// instance "3g.40gb#1", an AMD "CPX#2"), so that a cut name still tells
// the parts of one GPU apart.
func gpuDisplayName(d event.GPUDevice) string {
	name := gpuName(d.Name)
	if d.Partition == "" {
		return name
	}
	part := strings.ReplaceAll(strings.TrimPrefix(d.Partition, "MIG "), " #", "#")
	return strings.TrimSpace(part + " " + name)
}

// gpuLabelWidth is the cells a device's name column wants: its name, or
// its source tag when that is longer.
func gpuLabelWidth(d event.GPUDevice) int {
	return max(visibleWidth(gpuDisplayName(d)), visibleWidth(gpuSourceTag(d)))
}

// gpuSourceTag says where an exporter's GPU was read: "dcgm gpu-node-a",
// "amd mi300-node-1"; empty for a local (NVML) or simulated GPU.
func gpuSourceTag(d event.GPUDevice) string {
	switch d.Source {
	case event.GPUSourceDCGM, event.GPUSourceAMD:
		return strings.TrimSpace(d.Source + " " + gpuHost(d))
	}
	return ""
}

// gpuHost is the node an exporter's GPU is in: the exporter's own name for
// it, else the host of the page it was read from.
func gpuHost(d event.GPUDevice) string {
	if d.Host != "" || d.SourceURL == "" {
		return d.Host
	}
	if u, err := url.Parse(d.SourceURL); err == nil {
		return u.Hostname()
	}
	return ""
}

// gpuActivity lists the engines' activity an exporter reports: the SMs
// (or, without that field, the graphics/compute engine), the tensor
// cores, the memory interface.
func gpuActivity(d event.GPUDevice) []string {
	var out []string
	add := func(name string, v *float64) {
		if v != nil {
			out = append(out, fmt.Sprintf("%s %.0f%%", name, 100*(*v)))
		}
	}
	if d.SMActive != nil {
		add("sm", d.SMActive)
	} else {
		add("gr", d.GrEngineActive)
	}
	add("tensor", d.TensorActive)
	add("dram", d.DRAMActive)
	return out
}

// gpuPods names the first pod on a GPU and how many more share it.
func gpuPods(st *styles, d event.GPUDevice) string {
	if len(d.Pods) == 0 {
		return ""
	}
	p := d.Pods[0]
	s := "  pod " + p.Pod
	if p.Namespace != "" {
		s = "  pod " + p.Namespace + "/" + p.Pod
	}
	if len(d.Pods) > 1 {
		s += fmt.Sprintf(" +%d", len(d.Pods)-1)
	}
	return st.dim.Render(s)
}

// exporterState is the header's word for GPUs read from exporters: the
// exporters' kind, and whether every page answered.
func exporterState(st *styles, g *event.GPUSample) string {
	kind := ""
	stale := false
	for _, d := range g.Devices {
		switch {
		case kind == "":
			kind = d.Source
		case kind != d.Source:
			kind = "gpu"
		}
		stale = stale || d.Stale
	}
	switch {
	case !g.Available || kind == "":
		return "gpu " + st.bad.Render("✗")
	case stale:
		return kind + " " + st.warn.Render("stale")
	}
	return kind + " " + st.good.Render("✓")
}

func utilText(st *styles, util uint32) string { return "util " + utilPct(st, util) }

func utilPct(st *styles, util uint32) string {
	s := fmt.Sprintf("%3d%%", util)
	if util >= 90 {
		s = st.good.Render(s)
	}
	return s
}

func gpuTrouble(st *styles, d event.GPUDevice) string {
	out := ""
	if len(d.ThrottleReason) > 0 {
		out += "  " + st.warn.Render("throttle "+strings.Join(d.ThrottleReason, ","))
	}
	if len(d.Errors) > 0 {
		out += "  " + st.dim.Render(strings.Join(d.Errors, "; "))
	}
	return out
}

// gpuName drops the vendor and memory type: "H100 80GB", "MI300X".
func gpuName(name string) string {
	for _, vendor := range []string{"NVIDIA ", "AMD Instinct ", "AMD "} {
		name = strings.TrimPrefix(name, vendor)
	}
	for _, suffix := range []string{" HBM3e", " HBM3", " HBM2e", " PCIe", " SXM5", " SXM4"} {
		name = strings.TrimSuffix(name, suffix)
	}
	return name
}

var sparkRunes = []rune("▁▂▃▄▅▆▇█")

// spark draws values in 0..1 as a one-line sparkline n cells wide, right
// aligned (newest at the right).
func spark(vals []float64, n int) string {
	var b strings.Builder
	for range n - len(vals) {
		b.WriteByte(' ')
	}
	for _, v := range vals {
		k := int(v*float64(len(sparkRunes)-1) + 0.5)
		b.WriteRune(sparkRunes[min(max(k, 0), len(sparkRunes)-1)])
	}
	return b.String()
}

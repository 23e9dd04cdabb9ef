package tui

import (
	"fmt"
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
			l1, l2 := gpuLines(st, d, hist, i, width, buf)
			lines = append(lines, fit(l1, width), fit(l2, width))
		} else {
			lines = append(lines, fit(gpuCompact(st, d, width), width))
		}
	}
	return lines
}

// gpuLines is one device on two lines: utilisation and memory with their
// histories, then power, temperature, clock and throttle reasons.
// gpuLineWidth is the width of a device's first line for a name of nameW
// cells and histories of n.
func gpuLineWidth(nameW, n int) int { return 52 - 13 + max(nameW, 13) + 2*n }

func gpuLines(st *styles, d event.GPUDevice, hist *gpuHistory, i, width int, buf []float64) (string, string) {
	const fixed = 52 // the first line without its two sparklines, for a 13-cell name
	// The name takes what it needs from the sparklines, down to 4 cells each.
	name := gpuName(d.Name)
	nameW := max(13, min(visibleWidth(name), width-fixed+13-2))
	n := min(max((width-fixed-(nameW-13))/2, 1), gpuHistoryLen)
	var b strings.Builder
	fmt.Fprintf(&b, " %d %s ", d.Index, fit(name, nameW))
	b.WriteString(utilText(st, d.UtilGPU))
	b.WriteString(" " + st.accent.Render(spark(hist.series(buf, i, n, false), n)))
	fmt.Fprintf(&b, "  mem %s/%s GiB", gib(d.MemUsed), gib(d.MemTotal))
	b.WriteString(" " + st.accent.Render(spark(hist.series(buf, i, n, true), n)))
	power := fmt.Sprintf("%d W", d.PowerMilliW/1000)
	if d.PowerLimitMW > 0 {
		power = fmt.Sprintf("%d/%d W", d.PowerMilliW/1000, d.PowerLimitMW/1000)
	}
	second := fmt.Sprintf("%s%s  %d°C  %d MHz", strings.Repeat(" ", 4+nameW), power, d.TempC, d.SMClockMHz)
	return b.String(), second + gpuTrouble(st, d)
}

// gpuCompact is one device on one short line, without histories: the
// name whole when it can be, leaving out temperature, then power, first.
func gpuCompact(st *styles, d event.GPUDevice, width int) string {
	name := gpuName(d.Name)
	tail := []string{fmt.Sprintf("  %.0f/%.0fG", float64(d.MemUsed)/(1<<30), float64(d.MemTotal)/(1<<30)),
		fmt.Sprintf("  %dW", d.PowerMilliW/1000), fmt.Sprintf(" %d°C", d.TempC)}
	util := " " + utilPct(st, d.UtilGPU)
	head := func(nameW int) string { return fmt.Sprintf(" %d %s", d.Index, fit(name, nameW)) + util }
	for len(tail) > 1 && visibleWidth(head(visibleWidth(name))+strings.Join(tail, "")) > width {
		tail = tail[:len(tail)-1]
	}
	room := width - visibleWidth(head(0)+strings.Join(tail, ""))
	return head(max(9, min(visibleWidth(name), room))) + strings.Join(tail, "") + gpuTrouble(st, d)
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

// gpuName drops the vendor and memory type: "H100 80GB".
func gpuName(name string) string {
	name = strings.TrimPrefix(name, "NVIDIA ")
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

package collector

import (
	"os"
	"path/filepath"
	"testing"
)

func hostFixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "host", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParsePSI(t *testing.T) {
	p, err := parsePSI(hostFixture(t, "pressure_cpu_busy"))
	if err != nil || p.avg10 != 38.2 || p.total != 1400158781 {
		t.Fatalf("got %+v, %v", p, err)
	}
	for _, bad := range []string{"", "full avg10=1 total=2\n", "some avg10=x total=1\n", "some avg10=1.0\n", "some avg10=101 total=1\n", "some avg10=1 total=-1\n"} {
		if _, err := parsePSI(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	s, err := parseProcStat(hostFixture(t, "stat_calm"))
	if err != nil || s.cores != 2 || s.procsRunning != 1 || s.cpu.steal != 3523 ||
		s.cpu.busy != 344101+74326+77749+5961 || s.cpu.idle != 7483892+2684 {
		t.Fatalf("got %+v, %v", s, err)
	}
	if s, err := parseProcStat("cpu 1 2 3 4\n"); err != nil || s.procsRunning != -1 || s.cores != 0 || s.cpu.total() != 10 {
		t.Fatalf("old kernel: %+v, %v", s, err)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4\n", "cpu 1 2 3\n", "cpu 1 2 x 4\n", "cpu 1 2 3 4\nprocs_running -3\n"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseSelfStat(t *testing.T) {
	if n, err := parseSelfStat(hostFixture(t, "self_stat_a")); err != nil || n != 642 {
		t.Fatalf("got %d, %v", n, err)
	}
	// A command name with spaces and parentheses.
	if n, err := parseSelfStat("7 (a) b) (c) S 1 1 1 0 -1 0 0 0 0 0 3 4 0 0\n"); err != nil || n != 7 {
		t.Fatalf("odd name: %d, %v", n, err)
	}
	for _, bad := range []string{"", "7 latscope S 1", "7 (x) S 1 2 3", "7 (x) S 1 1 1 0 -1 0 0 0 0 0 a 4\n"} {
		if _, err := parseSelfStat(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzHostParsers feeds any text to the three /proc parsers: each parses
// or is refused, never panics, and what it returns is in range.
func FuzzHostParsers(f *testing.F) {
	for _, name := range []string{"pressure_cpu_calm", "pressure_cpu_busy", "stat_calm", "stat_busy", "self_stat_a"} {
		f.Add(hostFixture(f, name))
	}
	f.Add("cpu 18446744073709551615 18446744073709551615 18446744073709551615 18446744073709551615 1 1 1 1\n")
	f.Fuzz(func(t *testing.T, text string) {
		if p, err := parsePSI(text); err == nil && !(p.avg10 >= 0 && p.avg10 <= 100) {
			t.Fatalf("avg10 %v out of range", p.avg10)
		}
		if s, err := parseProcStat(text); err == nil && (s.cores < 0 || s.cores > maxProcStatCPUs || s.procsRunning < -1) {
			t.Fatalf("impossible /proc/stat %+v", s)
		}
		_, _ = parseSelfStat(text)
	})
}

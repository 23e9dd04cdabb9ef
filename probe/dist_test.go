package probe

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseLength(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Length
		ok   bool
	}{
		{"512", Length{Mean: 512}, true},
		{" 512 ", Length{Mean: 512}, true},
		{"512:128", Length{Mean: 512, StdDev: 128}, true},
		{"1:0", Length{Mean: 1}, true},
		{"abc", Length{}, false},
		{"", Length{}, false},
		{"0", Length{}, false},
		{"-5", Length{}, false},
		{"512:", Length{}, false},
		{"512:-1", Length{}, false},
		{"512:1:2", Length{}, false},
		{":128", Length{}, false},
		{"1e3", Length{}, false},
		{"99999999999", Length{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLength(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ParseLength(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if got != tt.want {
				t.Fatalf("ParseLength(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseLengthErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := ParseLength("abc")
	want := `invalid token length "abc": want N or MEAN:STDDEV`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}

func TestLengthSample(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	if got := (Length{Mean: 64}).Sample(rng); got != 64 {
		t.Fatalf("fixed length sampled %d, want 64", got)
	}
	// Mean and spread of a normal length.
	l := Length{Mean: 512, StdDev: 128}
	const n = 20000
	var sum, sq float64
	for range n {
		v := float64(l.Sample(rng))
		sum += v
		sq += v * v
	}
	mean := sum / n
	sd := math.Sqrt(sq/n - mean*mean)
	if math.Abs(mean-512) > 5 || math.Abs(sd-128) > 5 {
		t.Fatalf("mean %.1f sd %.1f, want about 512 and 128", mean, sd)
	}
	// A spread larger than the mean is clamped to at least 1.
	wide := Length{Mean: 2, StdDev: 100}
	for range 1000 {
		if v := wide.Sample(rng); v < 1 {
			t.Fatalf("sampled %d, want >= 1", v)
		}
	}
}

func FuzzParseLength(f *testing.F) {
	for _, s := range []string{"512", "512:128", "abc", "1:0", ":", "-1", "9999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLength(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid token length") {
				t.Fatalf("unclear error %q", err)
			}
			return
		}
		if l.Mean < 1 || l.StdDev < 0 {
			t.Fatalf("ParseLength(%q) = %+v accepted a bad length", s, l)
		}
		back, err := ParseLength(l.String())
		if err != nil || back != l {
			t.Fatalf("round trip %q -> %+v -> %q -> %+v, %v", s, l, l.String(), back, err)
		}
		if v := l.Sample(rand.New(rand.NewPCG(1, 1))); v < 1 {
			t.Fatalf("sample %d < 1", v)
		}
	})
}

package sim

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDisaggStages: a disaggregated server's truth splits the first token
// into the prefill queue, the prefill worker's prefill, the KV transfer
// (the link's configured time), the decode queue and the
// decode worker's first step; the stages still add up to the first frame,
// and the Server-Timing trailer names them.
func TestDisaggStages(t *testing.T) {
	d := Disagg{Enabled: true, PrefillWorkers: 1, DecodeWorkers: 2, KVBytesPerToken: 1 << 20, KVBandwidth: 10e9, KVLatency: 2 * time.Millisecond}
	_, url := startServer(t, Config{Profile: tinyProfile(t), Disagg: d, ServerTiming: true})
	const prompt = 200
	want := d.TransferTime(prompt)
	if got := 2*time.Millisecond + time.Duration(float64(prompt<<20)/10e9*float64(time.Second)); want != got {
		t.Fatalf("TransferTime(%d) = %v, want %v", prompt, want, got)
	}
	ctx := testCtx(t, time.Minute)
	var wg sync.WaitGroup
	results := make([]streamResult, 4)
	for i := range results {
		wg.Go(func() {
			results[i] = post(ctx, url, "/v1/chat/completions", chatBody(promptOf(prompt), 4, true), map[string]string{TruthHeader: "1"})
		})
	}
	wg.Wait()
	for i, res := range results {
		if res.err != nil || !res.done {
			t.Fatalf("request %d: err %v, done %v", i, res.err, res.done)
		}
		tr := lastTruth(t, res)
		if !tr.Disagg || tr.QueueUs != 0 {
			t.Errorf("request %d: disagg %v, queue_us %d: want a disaggregated truth with no colocated queue", i, tr.Disagg, tr.QueueUs)
		}
		if d := tr.KVTransferUs - want.Microseconds(); d < -1 || d > 1 {
			t.Errorf("request %d: kv_transfer_us %d, want the link's %v (±1 µs of rounding)", i, tr.KVTransferUs, want)
		}
		if tr.PrefillUs <= 0 || tr.FirstDecodeUs <= 0 {
			t.Errorf("request %d: prefill_us %d, first_decode_us %d: want both", i, tr.PrefillUs, tr.FirstDecodeUs)
		}
		var sum int64
		for _, s := range tr.Stages() {
			sum += s.Us
		}
		if sum != tr.ArrivalToFirstFrameUs || tr.OtherUs < 0 {
			t.Errorf("request %d: stages sum to %d µs, first frame %d µs, other %d", i, sum, tr.ArrivalToFirstFrameUs, tr.OtherUs)
		}
		st := timings(t, res.trailer)
		for _, name := range []string{"prefill_queue", "prefill", "kv_transfer", "decode_queue", "first_decode"} {
			if _, ok := st[name]; !ok {
				t.Errorf("request %d: Server-Timing trailer has no %s: %v", i, name, res.trailer)
			}
		}
		if _, ok := st["queue"]; ok {
			t.Errorf("request %d: Server-Timing trailer has a colocated queue: %v", i, res.trailer)
		}
	}
	// With one prefill worker the four prompts were prefilled one after
	// another: someone waited in the prefill queue.
	var waited bool
	for _, res := range results {
		waited = waited || lastTruth(t, res).PrefillQueueUs > 0
	}
	if !waited {
		t.Error("four prompts on one prefill worker: none waited in the prefill queue")
	}
}

// TestDisaggValidate: the pools and the link refuse what cannot be served.
func TestDisaggValidate(t *testing.T) {
	for _, c := range []struct {
		d    Disagg
		want string
	}{
		{Disagg{Enabled: true, PrefillWorkers: -1}, "prefill-workers"},
		{Disagg{Enabled: true, DecodeWorkers: maxDisaggWorkers + 1}, "decode-workers"},
		{Disagg{Enabled: true, KVBytesPerToken: -1}, "kv-bytes-per-token"},
		{Disagg{Enabled: true, KVBandwidth: -5}, "kv-bandwidth"},
		{Disagg{Enabled: true, KVLatency: -time.Second}, "kv-latency"},
	} {
		err := Config{Disagg: c.d}.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want one naming %s", c.d, err, c.want)
		}
	}
	if err := (Config{Disagg: Disagg{Enabled: true}, PrefixCacheBlocks: 8}).Validate(); err == nil {
		t.Error("disagg with a prefix cache: accepted")
	}
	if err := (Config{Disagg: Disagg{PrefillWorkers: -1}}).Validate(); err != nil {
		t.Errorf("disagg off: its fields are not checked, got %v", err)
	}
}

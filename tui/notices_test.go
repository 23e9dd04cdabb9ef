package tui

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// "recording to …" is news, not a warning; a failing recording is trouble.
func TestNoticesApartFromWarnings(t *testing.T) {
	t.Parallel()
	b := &NoticeBoard{}
	fmt.Fprintf(b, "latscope: recording to run.lsr\n")
	fmt.Fprintf(b, "latscope: export: 3 spans lost; collector refused them\n")
	fr, _ := WithNotices(StaticFeed{}, b).Frame()
	if len(fr.Notices) != 1 || fr.Notices[0] != "recording to run.lsr" {
		t.Errorf("notices %q, want the recording's", fr.Notices)
	}
	if len(fr.Status) != 1 || !strings.Contains(fr.Status[0], "lost") {
		t.Errorf("warnings %q, want the lost spans", fr.Status)
	}
}

// On the dashboard a failing recording's updates replace its notice
// instead of pushing the others off the header.
func TestNoticeUpdatesReplaceTheirNotice(t *testing.T) {
	t.Parallel()
	b := &NoticeBoard{}
	update := func(n int) string {
		return "latscope: recording to x failed: no space left on device; " + strconv.Itoa(n) + " events not recorded so far\n"
	}
	_, _ = b.Write([]byte("latscope: recording to x\n"))
	for n := range 10 {
		_, _ = b.Write([]byte(update(n + 1)))
	}
	got := b.recent(time.Now())
	if len(got) != 2 || got[0] != "recording to x" || !strings.Contains(got[1], "; 10 events not recorded so far") {
		t.Fatalf("notices %q, want the first notice and the latest update", got)
	}
}

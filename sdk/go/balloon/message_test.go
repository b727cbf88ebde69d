// Encoding the agent's messages, and keeping them within the protocol's rules whatever the
// application reports.

package balloon

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEncodeWritesTheTypeFirstOnOneLine(t *testing.T) {
	for _, tc := range []struct {
		m    message
		want string
	}{
		{bye{}, `{"type":"bye"}` + "\n"},
		{progress{Seq: 1, PoolBytes: 2, Status: statusDone}, `{"type":"progress","seq":1,"pool_bytes":2,"status":"done"}` + "\n"},
		{errorMessage{Code: CodeMalformed, Message: "line\nbreak"}, `{"type":"error","code":"malformed","message":"line\nbreak","fatal":false}` + "\n"},
	} {
		got, err := encode(tc.m)
		if err != nil || string(got) != tc.want {
			t.Errorf("encode(%#v) = %q, %v; want %q", tc.m, got, err, tc.want)
		}
	}
}

func TestAReasonIsCutTo1024BytesWithoutSplittingACharacter(t *testing.T) {
	long := strings.Repeat("é", 600) // 1,200 bytes
	cut := truncateUTF8(long, maxReasonBytes)
	if len(cut) != 1024 || !utf8.ValidString(cut) {
		t.Errorf("cut to %d bytes, valid UTF-8 %v; want 1024 valid", len(cut), utf8.ValidString(cut))
	}
	if odd := truncateUTF8("a"+long, maxReasonBytes); len(odd) != 1023 || !utf8.ValidString(odd) {
		t.Errorf("cut to %d bytes, valid UTF-8 %v; want 1023 valid", len(odd), utf8.ValidString(odd))
	}
	if short := truncateUTF8("short", maxReasonBytes); short != "short" {
		t.Errorf("a short reason became %q", short)
	}
}

func TestStatsKeepUsedAndDirtyWithinThePoolAndCountersFromGoingDown(t *testing.T) {
	last := stats{PoolBytes: 100, Hits: 50, Misses: 5, Evictions: 7}
	got := statsMessage(100, Stats{UsedBytes: 200, DirtyBytes: 300, Hits: 40, Misses: 6, Evictions: MaxInteger + 5}, last)
	want := stats{PoolBytes: 100, UsedBytes: 100, DirtyBytes: 100, Hits: 50, Misses: 6, Evictions: MaxInteger}
	if got != want {
		t.Errorf("statsMessage = %+v, want %+v", got, want)
	}
}

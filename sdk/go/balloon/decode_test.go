// The framing of memtide's lines and the decoder's answers to lines it cannot read.

package balloon

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLineReaderDropsTheNewlineAndOneCarriageReturn(t *testing.T) {
	lr := newLineReader(strings.NewReader("{\"a\":1}\r\n{\"b\":2}\n"))
	for _, want := range []string{`{"a":1}`, `{"b":2}`} {
		line, err := lr.next()
		if err != nil || string(line) != want {
			t.Errorf("next() = %q, %v; want %q", line, err, want)
		}
	}
	if _, err := lr.next(); !errors.Is(err, io.EOF) {
		t.Errorf("at the end next() returned %v, want EOF", err)
	}
}

func TestLineReaderTakesALineOfExactlyTheLimitAndRefusesOneByteMore(t *testing.T) {
	fits := strings.Repeat("a", MaxLineBytes-1)
	over := strings.Repeat("b", MaxLineBytes)
	lr := newLineReader(strings.NewReader(fits + "\n" + over + "\n" + "next\n"))
	if line, err := lr.next(); err != nil || len(line) != MaxLineBytes-1 {
		t.Errorf("a line of %d bytes with its newline: %d bytes, %v", MaxLineBytes, len(line), err)
	}
	_, err := lr.next()
	if !errors.Is(err, CodeTooLong) {
		t.Errorf("a line of %d bytes with its newline: %v, want too_long", MaxLineBytes+1, err)
	}
	if line, err := lr.next(); err != nil || string(line) != "next" {
		t.Errorf("after a long line next() = %q, %v; want the next line", line, err)
	}
}

func TestLineReaderDropsAnUnfinishedLastLine(t *testing.T) {
	lr := newLineReader(strings.NewReader(`{"type":"bye"`))
	if line, err := lr.next(); !errors.Is(err, io.EOF) {
		t.Errorf("next() = %q, %v; want EOF", line, err)
	}
}

func TestDecodeAnswersEachUnreadableLineWithItsCode(t *testing.T) {
	cases := []struct {
		line string
		code Code
	}{
		{"{\"type\":\"bye\",\"reason\":\"\xff\"}", CodeMalformed},
		{"null", CodeMalformed},
		{"", CodeMalformed},
		{"[1]", CodeMalformed},
		{`{"type":"bye"}{"type":"bye"}`, CodeMalformed},
		{`{"type":null}`, CodeUnknownType},
		{`{"type":"stats","pool_bytes":1}`, CodeUnknownType},
		{`{"type":"target","seq":1,"pool_bytes":1e3,"deadline_ms":1}`, CodeBadField},
		{`{"type":"target","seq":1,"pool_bytes":1.0,"deadline_ms":1}`, CodeBadField},
		{`{"type":"target","seq":1,"pool_bytes":99999999999999999999,"deadline_ms":1}`, CodeBadField},
		{`{"type":"bye","reason":5}`, CodeBadField},
		{`{"type":"bye","reason":"` + strings.Repeat("r", 1025) + `"}`, CodeBadField},
		{`{"type":"error","code":"busy","fatal":1}`, CodeBadField},
		{`{"type":"error","code":"","fatal":true}`, CodeBadField},
		{`{"type":"welcome","version":"2","tenant":"","stats_interval_ms":1,"dead_after_ms":1}`, CodeBadField},
		{`{"type":"welcome","version":3,"tenant":"","stats_interval_ms":0,"dead_after_ms":0}`, CodeVersion},
	}
	for _, tc := range cases {
		msg, perr := decodeLine([]byte(tc.line))
		if perr == nil || perr.Code != tc.code {
			t.Errorf("%.60s: decoded to %v, %v; want %s", tc.line, msg, perr, tc.code)
		}
	}
}

func TestDecodeNamesTheFieldAndValueItRefuses(t *testing.T) {
	_, perr := decodeLine([]byte(`{"type":"target","seq":1,"pool_bytes":-4096,"deadline_ms":30000}`))
	if perr == nil || perr.Message != "target.pool_bytes = -4096 is not an integer in [0, 2^53-1]" {
		t.Errorf("got %v", perr)
	}
	_, perr = decodeLine([]byte(`{"type":"target","seq":1,"pool_bytes":4096}`))
	if perr == nil || perr.Message != "target.deadline_ms is missing" {
		t.Errorf("got %v", perr)
	}
}

func TestDecodeQuotesOnlyTheStartOfALongValue(t *testing.T) {
	_, perr := decodeLine([]byte(`{"type":"target","seq":"` + strings.Repeat("s", 10000) + `","pool_bytes":1,"deadline_ms":1}`))
	if perr == nil || len(perr.Message) > 200 || !strings.HasSuffix(perr.Message, "... is not an integer in [0, 2^53-1]") {
		t.Errorf("got %v", perr)
	}
}

func TestDecodeReadsAWelcomeWrittenWithSpaces(t *testing.T) {
	msg, perr := decodeLine([]byte(` { "type" : "welcome", "version" : 1, "tenant" : "db", "stats_interval_ms" : 1000, "dead_after_ms" : 5000 } `))
	want := welcome{Version: 1, Tenant: "db", StatsIntervalMS: 1000, DeadAfterMS: 5000}
	if perr != nil || msg != want {
		t.Errorf("decoded to %v, %v; want %v", msg, perr, want)
	}
}

func TestAnErrorFromMemtideNeedsAKnownCodeAMessageAndFatal(t *testing.T) {
	for _, line := range []string{
		`{"type":"error","code":"later_code","message":"x","fatal":false}`,
		`{"type":"error","code":"busy","fatal":true}`,
		`{"type":"error","code":"busy","message":"x"}`,
	} {
		if msg, perr := decodeLine([]byte(line)); perr == nil || perr.Code != CodeBadField {
			t.Errorf("%s decoded to %v, %v; want a bad_field error", line, msg, perr)
		}
	}
}

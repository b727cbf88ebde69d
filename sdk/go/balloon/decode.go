// Reading memtide's lines: the bounded line reader of the protocol's framing, and the strict
// decoder of the messages memtide sends (welcome, target, bye, error), whose every failure is a
// *ProtocolError with the code the agent answers with.

package balloon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// lineReader splits a stream into lines of at most MaxLineBytes, newline included.
type lineReader struct {
	r *bufio.Reader
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, MaxLineBytes)}
}

// next returns the next line without its "\n" and a "\r" before it. The slice is valid until
// the next call. A line over MaxLineBytes is dropped up to its "\n" and reported as a
// *ProtocolError with CodeTooLong; any other error is the stream's (io.EOF at its end, where an
// unfinished last line is dropped).
func (lr *lineReader) next() ([]byte, error) {
	line, err := lr.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		for errors.Is(err, bufio.ErrBufferFull) {
			_, err = lr.r.ReadSlice('\n')
		}
		if err != nil {
			return nil, err
		}
		return nil, protocolErrorf(CodeTooLong, "a line is over %d bytes with its newline", MaxLineBytes)
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// decodeLine reads one line from memtide (without its newline). It returns a welcome, target,
// bye or errorMessage, or a *ProtocolError saying why the line cannot be read.
func decodeLine(line []byte) (message, *ProtocolError) {
	if !utf8.Valid(line) {
		return nil, protocolErrorf(CodeMalformed, "the line is not UTF-8")
	}
	if trimmed := bytes.TrimLeft(line, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, protocolErrorf(CodeMalformed, "the line is not a JSON object: %s", excerpt(line))
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(line, &obj); err != nil {
		return nil, protocolErrorf(CodeMalformed, "the line is not a JSON object: %v", err)
	}
	rawType, ok := obj["type"]
	if !ok {
		return nil, protocolErrorf(CodeUnknownType, "the line has no type")
	}
	var typ string
	if rawType[0] != '"' || json.Unmarshal(rawType, &typ) != nil {
		return nil, protocolErrorf(CodeUnknownType, "type = %s is not a string", excerpt(rawType))
	}
	f := &fields{msg: typ, obj: obj}
	switch typ {
	case "welcome":
		return f.welcome()
	case "target":
		m := target{
			Seq:        f.integer("seq", 1),
			PoolBytes:  f.integer("pool_bytes", 0),
			DeadlineMS: f.integer("deadline_ms", 1),
		}
		return f.result(m)
	case "bye":
		return f.result(bye{Reason: f.reason("reason")})
	case "error":
		m := errorMessage{
			Code:    Code(f.str("code", true)),
			Message: f.str("message", false),
			Fatal:   f.boolean("fatal"),
		}
		if _, ok := f.obj["message"]; !ok {
			f.fail("message", "is missing")
		}
		if _, ok := f.obj["fatal"]; !ok {
			f.fail("fatal", "is missing")
		}
		if f.err == nil && !m.Code.known() {
			f.fail("code", fmt.Sprintf("= %q is not a code of version 1", truncateUTF8(string(m.Code), excerptBytes)))
		}
		return f.result(m)
	default:
		return nil, protocolErrorf(CodeUnknownType, "type = %q is no message memtide sends", truncateUTF8(typ, excerptBytes))
	}
}

// fields reads the fields of one message, keeping the first error.
type fields struct {
	msg string
	obj map[string]json.RawMessage
	err *ProtocolError
}

func (f *fields) result(m message) (message, *ProtocolError) {
	if f.err != nil {
		return nil, f.err
	}
	return m, nil
}

func (f *fields) fail(name, what string) {
	if f.err == nil {
		f.err = protocolErrorf(CodeBadField, "%s.%s %s", f.msg, name, what)
	}
}

func (f *fields) failValue(name string, raw json.RawMessage, what string) {
	f.fail(name, fmt.Sprintf("= %s %s", excerpt(raw), what))
}

func (f *fields) welcome() (message, *ProtocolError) {
	version := f.integer("version", 0)
	if f.err == nil && version != Version {
		return nil, protocolErrorf(CodeVersion, "welcome.version = %d: this agent speaks version %d", version, Version)
	}
	m := welcome{
		Version:         Version,
		Tenant:          f.str("tenant", true),
		StatsIntervalMS: f.integer("stats_interval_ms", 1),
	}
	m.DeadAfterMS = f.integer("dead_after_ms", 0)
	if f.err == nil && m.DeadAfterMS < m.StatsIntervalMS {
		f.fail("dead_after_ms", fmt.Sprintf("= %d is below stats_interval_ms = %d", m.DeadAfterMS, m.StatsIntervalMS))
	}
	return f.result(m)
}

// integer reads a required integer in [min, MaxInteger]: digits only, no sign, fraction or
// exponent.
func (f *fields) integer(name string, min uint64) uint64 {
	raw, ok := f.obj[name]
	if !ok {
		f.fail(name, "is missing")
		return 0
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			f.failValue(name, raw, "is not an integer in [0, 2^53-1]")
			return 0
		}
	}
	v, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil || v > MaxInteger {
		f.failValue(name, raw, "is over 2^53-1")
		return 0
	}
	if v < min {
		f.failValue(name, raw, fmt.Sprintf("is below %d", min))
		return 0
	}
	return v
}

// str reads a string, which must be there and not empty if required.
func (f *fields) str(name string, required bool) string {
	raw, ok := f.obj[name]
	if !ok {
		if required {
			f.fail(name, "is missing")
		}
		return ""
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		f.failValue(name, raw, "is not a string")
		return ""
	}
	if required && s == "" {
		f.fail(name, "is empty")
	}
	return s
}

// reason reads an optional string of at most maxReasonBytes.
func (f *fields) reason(name string) string {
	s := f.str(name, false)
	if len(s) > maxReasonBytes {
		f.fail(name, fmt.Sprintf("is %d bytes, over %d", len(s), maxReasonBytes))
	}
	return s
}

// boolean reads an optional boolean, false when absent.
func (f *fields) boolean(name string) bool {
	raw, ok := f.obj[name]
	if !ok {
		return false
	}
	switch string(raw) {
	case "true":
		return true
	case "false":
		return false
	}
	f.failValue(name, raw, "is not a boolean")
	return false
}

// excerptBytes bounds the part of a value or line quoted in an error message.
const excerptBytes = 64

// excerpt quotes the start of raw JSON for an error message.
func excerpt(raw []byte) string {
	if len(raw) <= excerptBytes {
		return string(raw)
	}
	return truncateUTF8(string(raw), excerptBytes) + "..."
}

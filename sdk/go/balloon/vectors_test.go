// The shared test vectors of protocol/vectors/: every single line of messages.json that the
// agent reads or writes, and every agent/*.json exchange played against a running agent.

package balloon

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// vectorsDir is protocol/vectors/ from this package's directory, sdk/go/balloon.
var vectorsDir = filepath.Join("..", "..", "..", "protocol", "vectors")

type lineVector struct {
	Name      string          `json:"name"`
	Direction string          `json:"direction"`
	Line      string          `json:"line"`
	Valid     bool            `json:"valid"`
	Message   json.RawMessage `json:"message"`
	Error     Code            `json:"error"`
}

func loadLineVectors(t *testing.T) []lineVector {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(vectorsDir, "messages.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []lineVector `json:"vectors"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("messages.json: %v", err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("messages.json has no vectors")
	}
	return file.Vectors
}

// readAndDecode reads a line as the agent does from its socket: framed, then decoded.
func readAndDecode(line string) (message, *ProtocolError) {
	raw, err := newLineReader(strings.NewReader(line + "\n")).next()
	var perr *ProtocolError
	if errors.As(err, &perr) {
		return nil, perr
	}
	if err != nil {
		return nil, protocolErrorf(CodeMalformed, "framing: %v", err)
	}
	return decodeLine(raw)
}

// sameJSON tells whether two JSON texts are equal as values, numbers compared as written.
func sameJSON(t *testing.T, got, want []byte) bool {
	t.Helper()
	g, err := decodeObject(got)
	if err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	w, err := decodeObject(want)
	if err != nil {
		t.Fatalf("%s: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

func TestLinesToTheAgentDecodeAsTheVectorsSay(t *testing.T) {
	n := 0
	for _, v := range loadLineVectors(t) {
		if v.Direction != "to_agent" {
			continue
		}
		n++
		msg, perr := readAndDecode(v.Line)
		switch {
		case !v.Valid && perr == nil:
			t.Errorf("%s: decoded to %+v, want error %s", v.Name, msg, v.Error)
		case !v.Valid && perr.Code != v.Error:
			t.Errorf("%s: error %v, want %s", v.Name, perr, v.Error)
		case v.Valid && perr != nil:
			t.Errorf("%s: %v", v.Name, perr)
		case v.Valid:
			line, err := encode(msg)
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			if !sameJSON(t, line, v.Message) {
				t.Errorf("%s: decoded to %s, want %s", v.Name, line, v.Message)
			}
		}
	}
	if n == 0 {
		t.Fatal("no to_agent vectors")
	}
}

// buildToMemtide builds a valid to_memtide vector's message the way the agent does.
func buildToMemtide(t *testing.T, v lineVector) message {
	t.Helper()
	var head struct{ Type string }
	if err := json.Unmarshal(v.Message, &head); err != nil {
		t.Fatalf("%s: %v", v.Name, err)
	}
	unmarshal := func(into any) {
		if err := json.Unmarshal(v.Message, into); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
	}
	switch head.Type {
	case "hello":
		var h hello
		unmarshal(&h)
		agent, err := NewAgent(Config{
			App: h.App, Kind: h.Kind,
			PoolBytes: h.PoolBytes, MinBytes: h.MinBytes, MaxBytes: h.MaxBytes, GranuleBytes: h.GranuleBytes,
			Pool: &testPool{},
		})
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		agent.pid = h.PID
		return agent.hello()
	case "stats":
		var s stats
		unmarshal(&s)
		return statsMessage(s.PoolBytes, Stats{
			UsedBytes: s.UsedBytes, Hits: s.Hits, Misses: s.Misses, Evictions: s.Evictions, DirtyBytes: s.DirtyBytes,
		}, stats{})
	case "progress":
		var p progress
		unmarshal(&p)
		return p
	case "bye":
		var b bye
		unmarshal(&b)
		return b
	case "error":
		var e errorMessage
		unmarshal(&e)
		return e
	}
	t.Fatalf("%s: the agent sends no %q", v.Name, head.Type)
	return nil
}

func TestMessagesToMemtideEncodeAsTheVectorsSay(t *testing.T) {
	n := 0
	for _, v := range loadLineVectors(t) {
		if v.Direction != "to_memtide" || !v.Valid {
			continue
		}
		// The SDK sends no miss-ratio curve (stats.curve is optional): it cannot build one. Nor
		// durability figures (stats.durability is optional): only a database has them, and
		// memtide-adapter sends a MariaDB's.
		var optional struct{ Curve, Durability json.RawMessage }
		if json.Unmarshal(v.Message, &optional) == nil && (optional.Curve != nil || optional.Durability != nil) {
			continue
		}
		n++
		line, err := encode(buildToMemtide(t, v))
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		if !sameJSON(t, line, v.Message) {
			t.Errorf("%s: encoded as %s, want %s", v.Name, line, v.Message)
		}
	}
	if n == 0 {
		t.Fatal("no valid to_memtide vectors")
	}
}

// An invalid hello whose fields a Config can hold (version 1, the vectors' pid, sizes that are
// integers) is one NewAgent refuses, so the agent never sends it.
func TestInvalidHelloVectorsAreRefusedAsConfigs(t *testing.T) {
	n := 0
	for _, v := range loadLineVectors(t) {
		var h hello
		if v.Direction != "to_memtide" || v.Valid || !strings.Contains(v.Line, `"type":"hello"`) ||
			json.Unmarshal([]byte(v.Line), &h) != nil || h.Version != Version || h.PID != 4242 {
			continue
		}
		n++
		_, err := NewAgent(Config{
			App: h.App, Kind: h.Kind,
			PoolBytes: h.PoolBytes, MinBytes: h.MinBytes, MaxBytes: h.MaxBytes, GranuleBytes: h.GranuleBytes,
			Pool: &testPool{},
		})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: NewAgent returned %v, want an invalid config", v.Name, err)
		}
	}
	if n < 10 {
		t.Fatalf("only %d invalid hello vectors fit a Config; expected at least 10", n)
	}
}

type exchange struct {
	Name string `json:"name"`
	Pool struct {
		App          string `json:"app"`
		Kind         Kind   `json:"kind"`
		PoolBytes    uint64 `json:"pool_bytes"`
		MinBytes     uint64 `json:"min_bytes"`
		MaxBytes     uint64 `json:"max_bytes"`
		GranuleBytes uint64 `json:"granule_bytes"`
	} `json:"pool"`
	App   string `json:"app"`
	Steps []struct {
		Send         *string        `json:"send"`
		Expect       map[string]any `json:"expect"`
		ExpectClosed bool           `json:"expect_closed"`
	} `json:"steps"`
}

func TestAgentPlaysEveryExchangeOfTheVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(vectorsDir, "agent", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no agent exchanges in %s: %v", vectorsDir, err)
	}
	for _, file := range files {
		file := file
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var x exchange
			dec := json.NewDecoder(strings.NewReader(string(data)))
			dec.UseNumber()
			if err := dec.Decode(&x); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if x.App != "comply" && x.App != "refuse" {
				t.Fatalf("app %q is neither comply nor refuse", x.App)
			}
			m := newMemtide(t)
			pool := &testPool{size: x.Pool.PoolBytes, refuse: x.App == "refuse"}
			startAgent(t, Config{
				App: x.Pool.App, Kind: x.Pool.Kind,
				PoolBytes: x.Pool.PoolBytes, MinBytes: x.Pool.MinBytes, MaxBytes: x.Pool.MaxBytes,
				GranuleBytes: x.Pool.GranuleBytes,
				Pool:         pool,
				SocketPath:   m.path,
			})
			p := m.accept()
			for i, step := range x.Steps {
				switch {
				case step.Send != nil:
					p.send(*step.Send)
				case step.Expect != nil:
					p.expect(step.Expect)
				case step.ExpectClosed:
					p.expectClosed()
				default:
					t.Fatalf("step %d is none of send, expect, expect_closed", i)
				}
			}
		})
	}
}

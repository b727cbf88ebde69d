// NewAgent's checks of a Config against the rules of a hello, and where the socket is found.

package balloon

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{
		App: "mariadb", Kind: KindBufferPool,
		PoolBytes: 8 << 30, MinBytes: 1 << 30, MaxBytes: 8 << 30, GranuleBytes: 1 << 20,
		Pool: &testPool{},
	}
}

func TestNewAgentAcceptsAValidConfigWithDefaultBackoff(t *testing.T) {
	a, err := NewAgent(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.MinBackoff != 100*time.Millisecond || a.cfg.MaxBackoff != 30*time.Second {
		t.Errorf("back-off from %v to %v, want 100ms to 30s", a.cfg.MinBackoff, a.cfg.MaxBackoff)
	}
}

func TestNewAgentRefusesAConfigThatBreaksAHelloRuleNamingTheField(t *testing.T) {
	cases := []struct {
		name   string
		change func(*Config)
		names  string
	}{
		{"empty app", func(c *Config) { c.App = "" }, "app"},
		{"app of 129 bytes", func(c *Config) { c.App = strings.Repeat("a", 129) }, "app"},
		{"control character in app", func(c *Config) { c.App = "my\adb" }, "app"},
		{"app not UTF-8", func(c *Config) { c.App = "my\xffdb" }, "app"},
		{"unknown kind", func(c *Config) { c.Kind = "disk" }, "kind"},
		{"no kind", func(c *Config) { c.Kind = "" }, "kind"},
		{"min above max", func(c *Config) { c.MinBytes = 9 << 30 }, "min_bytes"},
		{"pool above max", func(c *Config) { c.PoolBytes = 9 << 30 }, "pool_bytes"},
		{"pool below min", func(c *Config) { c.PoolBytes = 1 }, "pool_bytes"},
		{"max past 2^53-1", func(c *Config) { c.MaxBytes = MaxInteger + 1 }, "max_bytes"},
		{"granule 0", func(c *Config) { c.GranuleBytes = 0 }, "granule_bytes"},
		{"granule above max", func(c *Config) { c.GranuleBytes = 16 << 30 }, "granule_bytes"},
		{"no pool", func(c *Config) { c.Pool = nil }, "Pool"},
		{"negative back-off", func(c *Config) { c.MinBackoff = -time.Second }, "back-off"},
		{"back-off minimum above maximum", func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Minute, time.Second }, "back-off"},
	}
	for _, tc := range cases {
		cfg := validConfig()
		tc.change(&cfg)
		_, err := NewAgent(cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("%s: NewAgent returned %v, want an invalid config naming %s", tc.name, err, tc.names)
		}
	}
}

func TestNewAgentAcceptsAnEmptyPoolWithGranuleOne(t *testing.T) {
	cfg := validConfig()
	cfg.PoolBytes, cfg.MinBytes, cfg.MaxBytes, cfg.GranuleBytes = 0, 0, 0, 1
	if _, err := NewAgent(cfg); err != nil {
		t.Error(err)
	}
}

func TestAMinimumBackoffAboveTheDefaultMaximumRaisesTheMaximum(t *testing.T) {
	cfg := validConfig()
	cfg.MinBackoff = time.Minute
	a, err := NewAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.cfg.MaxBackoff != time.Minute {
		t.Errorf("maximum back-off %v, want the minimum, 1m", a.cfg.MaxBackoff)
	}
}

func TestSocketPathComesFromConfigThenEnvironmentThenDefault(t *testing.T) {
	t.Setenv(SocketEnv, "")
	cfg := validConfig()
	if a, _ := NewAgent(cfg); a.path != DefaultSocketPath {
		t.Errorf("with nothing set the path is %q, want %q", a.path, DefaultSocketPath)
	}
	t.Setenv(SocketEnv, "/tmp/from-env.sock")
	if a, _ := NewAgent(cfg); a.path != "/tmp/from-env.sock" {
		t.Errorf("with %s set the path is %q, want the variable's", SocketEnv, a.path)
	}
	cfg.SocketPath = "/tmp/from-config.sock"
	if a, _ := NewAgent(cfg); a.path != "/tmp/from-config.sock" {
		t.Errorf("with Config.SocketPath set the path is %q, want the config's", a.path)
	}
}

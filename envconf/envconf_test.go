package envconf

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/session"
)

func TestLoadEnv(t *testing.T) {
	cases := []struct {
		name string
		vars map[string]string
		want Env
	}{
		{"unset: the defaults, the dev token said", nil, Env{
			TemporalAddress: "127.0.0.1:7233", TemporalNamespace: "default",
			AMQPURL: "amqp://guest:guest@127.0.0.1:5672/", KafkaBrokers: "127.0.0.1:9092",
			Schedulers: []string{"127.0.0.1:7420"}, Token: session.DevToken, DevToken: true,
		}},
		{"set", map[string]string{
			"TEMPORAL_ADDRESS": "t:7233", "TEMPORAL_NAMESPACE": "crawl", "TEMPORAL_UI_URL": "https://ui",
			"TEMPORAL_UI": "https://old", "AMQP_URL": "amqp://r/", "KAFKA_BROKERS": "k1:9092,k2:9092",
			"DROVER_SCHEDULER": "s1:7420, s2:7420", "DROVER_TOKEN": "secret",
		}, Env{
			TemporalAddress: "t:7233", TemporalNamespace: "crawl", TemporalUIURL: "https://ui", TemporalUI: "https://old",
			AMQPURL: "amqp://r/", KafkaBrokers: "k1:9092,k2:9092", Schedulers: []string{"s1:7420", "s2:7420"}, Token: "secret",
		}},
		{"blank is unset", map[string]string{"TEMPORAL_ADDRESS": " ", "DROVER_SCHEDULER": ","}, Env{
			TemporalAddress: "127.0.0.1:7233", TemporalNamespace: "default",
			AMQPURL: "amqp://guest:guest@127.0.0.1:5672/", KafkaBrokers: "127.0.0.1:9092",
			Schedulers: []string{"127.0.0.1:7420"}, Token: session.DevToken, DevToken: true,
		}},
	}
	for _, c := range cases {
		got := Load(func(k string) string { return c.vars[k] })
		assert.Equal(t, c.want, got, c.name)
	}
}

func TestDefaultGCLeavesAGOGCTheEnvironmentSets(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	require.False(t, DefaultGC(func(k string) string { return map[string]string{"GOGC": "50"}[k] }, 400), "DefaultGC overrode the environment's GOGC")
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC after DefaultGC with GOGC set, want it untouched")
	require.True(t, DefaultGC(func(string) string { return "" }, 400), "DefaultGC did not set GOGC with none in the environment")
	require.Equal(t, 400, debug.SetGCPercent(100), "GOGC after DefaultGC(400) with none in the environment")
}

package client_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandbox-executor/sandbox-executor/client"
)

func TestStats(t *testing.T) {
	a := startAgent(t, agentConfig{})
	s, err := a.c.Stats(t.Context())
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), s.Time, time.Minute)
	require.NotNil(t, s.CPU)
	assert.Positive(t, s.CPU.UsageSeconds)
	assert.Positive(t, s.CPU.LimitCores)
	require.NotNil(t, s.Memory)
	assert.Positive(t, s.Memory.Used)
	assert.GreaterOrEqual(t, s.Memory.Limit, s.Memory.Used)
	require.NotNil(t, s.Disk)
	assert.Positive(t, s.Disk.Size)
	assert.Positive(t, s.Agent.RSS)
	assert.Positive(t, s.Agent.Goroutines)

	_, err = newClient(t, a.ts, a.ts.URL, "wrong").Stats(t.Context())
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 401, ae.StatusCode)
}

func TestMetrics(t *testing.T) {
	a := startAgent(t, agentConfig{})
	_, err := a.c.Run(t.Context(), client.Command{Cmd: "true"})
	require.NoError(t, err)
	text, err := a.c.Metrics(t.Context())
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(text))
	require.NoError(t, err)
	require.Contains(t, families, "sandbox_http_requests_total")
	found := false
	for _, m := range families["sandbox_http_requests_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "route" && l.GetValue() == "/run" {
				found = m.Counter.GetValue() == 1
			}
		}
	}
	assert.True(t, found, "one /run counted")

	_, err = newClient(t, a.ts, a.ts.URL, "wrong").Metrics(t.Context())
	var ae *client.Error
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, 401, ae.StatusCode)
}
